/**
 * Runs `work` and, while it is still going, calls `warn` with the seconds waited so far every
 * `everyMs`: an operation that hangs says so (and what it is, from the caller's message) while it
 * hangs, rather than leaving nothing to read once someone gives up on it.
 */
export async function warnWhileWaiting<T>(work: () => Promise<T> | T, everyMs: number, warn: (waitedSec: number) => void): Promise<T> {
  const started = performance.now();
  const timer = setInterval(() => warn(Math.round((performance.now() - started) / 1000)), everyMs);
  timer.unref();
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
