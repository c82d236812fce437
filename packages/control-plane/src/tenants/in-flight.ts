/**
 * How many things are under way per key. `begin` returns the function that ends one: only its first
 * call counts (and runs `onEnd`), so a stream's close and a call's `finally` may both call it.
 */
export class InFlight {
  private readonly counts = new Map<string, number>();

  begin(key: string, onEnd?: () => void): () => void {
    this.counts.set(key, this.count(key) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      onEnd?.();
      const left = this.count(key) - 1;
      if (left > 0) this.counts.set(key, left);
      else this.counts.delete(key);
    };
  }

  /** The keys with something under way. */
  keys(): string[] {
    return [...this.counts.keys()];
  }

  count(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  forget(key: string): void {
    this.counts.delete(key);
  }
}
