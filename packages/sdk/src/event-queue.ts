/**
 * Events arriving from a socket, read as an async iterator: items queue until read, a failure is
 * thrown to the reader after the items before it, and the iteration ends when the source finishes.
 */
export class EventQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiting: { resolve: (value: IteratorResult<T>) => void; reject: (err: Error) => void } | null = null;
  private failure: Error | null = null;
  private finished = false;

  push(item: T): void {
    if (this.finished) return;
    const waiting = this.waiting;
    this.waiting = null;
    if (waiting) waiting.resolve({ value: item, done: false });
    else this.items.push(item);
  }

  /** Ends the iteration, with `error` thrown to the reader when given. Later calls change nothing. */
  finish(error: Error | null): void {
    if (this.finished) return;
    this.finished = true;
    this.failure = error;
    const waiting = this.waiting;
    this.waiting = null;
    if (!waiting) return;
    if (error) waiting.reject(error);
    else waiting.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const item = this.items.shift();
        if (item !== undefined) return Promise.resolve({ value: item, done: false });
        if (this.failure) return Promise.reject(this.failure);
        if (this.finished) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.waiting = { resolve, reject };
        });
      },
    };
  }
}
