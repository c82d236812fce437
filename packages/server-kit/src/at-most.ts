/**
 * Runs `work` on every item, at most `limit` at once: each of `limit` workers takes the next item
 * until none is left. `work` gets the item and its index; it handles its own failures (one that
 * throws fails the whole run, after the items already taken).
 */
export async function eachAtMost<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < items.length; i = next++) await work(items[i]!, i);
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
}
