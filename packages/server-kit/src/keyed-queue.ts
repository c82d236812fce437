/** What to do when a task waited too long for its turn: it does not run, and the caller gets `timedOut()`. */
export interface QueueWait {
  ms: number;
  timedOut: () => Error;
}

/**
 * Runs tasks one at a time per key, in the order they arrive: a restore, a delete and a checkpoint
 * of one session never overlap, while other sessions' tasks run side by side.
 */
export class KeyedQueue {
  /** Per key, a promise that settles when the last task queued so far has finished. */
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, task: () => Promise<T>, wait?: QueueWait): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    let finished!: () => void;
    const mine = new Promise<void>((resolve) => (finished = resolve));
    // Tails never reject, so the chain holds whatever the tasks throw.
    const tail = before.then(() => mine);
    this.tails.set(key, tail);
    try {
      await (wait ? withTimeout(before, wait) : before);
      return await task();
    } finally {
      finished();
      // Forgotten only once everything before has finished too (a waiter that gave up leaves earlier tasks running).
      void tail.then(() => {
        if (this.tails.get(key) === tail) this.tails.delete(key);
      });
    }
  }

  /** Whether a task of `key` is running or waiting. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }

  /** Resolves once every task queued for `key` so far has finished (or, with `wait`, rejects after `wait.ms`). */
  async drained(key: string, wait?: QueueWait): Promise<void> {
    const tail = this.tails.get(key);
    if (tail) await (wait ? withTimeout(tail, wait) : tail);
  }
}

function withTimeout(promise: Promise<void>, wait: QueueWait): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(wait.timedOut()), wait.ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
