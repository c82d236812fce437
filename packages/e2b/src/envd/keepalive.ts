/** E2B clients ask for a keepalive event this often (seconds) with this header; bounded here. */
const keepaliveHeader = 'keepalive-ping-interval';
const defaultKeepaliveSec = 30;

export function keepaliveMs(headers: Headers): number {
  const asked = Number(headers.get(keepaliveHeader));
  return Math.min(Math.max(Number.isFinite(asked) && asked > 0 ? asked : defaultKeepaliveSec, 1), 300) * 1000;
}

/**
 * The items of `source`, with `keepalive()` in between whenever none came for `everyMs`: a
 * long-quiet stream (a command printing nothing) stays open through proxies and client timeouts.
 * Ends with the source, or when `signal` aborts (the client left).
 */
export async function* withKeepalives<T, K>(source: AsyncIterable<T>, everyMs: number, keepalive: () => K, signal: AbortSignal): AsyncGenerator<T | K> {
  const iterator = source[Symbol.asyncIterator]();
  const aborted = new Promise<'aborted'>((resolve) => {
    if (signal.aborted) resolve('aborted');
    signal.addEventListener('abort', () => resolve('aborted'), { once: true });
  });
  let next = iterator.next();
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const tick = new Promise<'tick'>((resolve) => (timer = setTimeout(() => resolve('tick'), everyMs)));
    const won = await Promise.race([next, tick, aborted]);
    clearTimeout(timer);
    if (won === 'aborted') return;
    if (won === 'tick') {
      yield keepalive();
      continue;
    }
    if (won.done) return;
    yield won.value;
    next = iterator.next();
  }
}
