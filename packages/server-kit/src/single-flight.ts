/**
 * At most one run of an async task per key at a time: callers asking for a key whose task is
 * under way share its promise (two calls must never start two sandboxes for one session).
 */
export class SingleFlight<T> {
  private readonly running = new Map<string, Promise<T>>();

  run(key: string, task: () => Promise<T>): Promise<T> {
    let pending = this.running.get(key);
    if (!pending) {
      pending = task().finally(() => this.running.delete(key));
      this.running.set(key, pending);
    }
    return pending;
  }

  /** The task under way for `key`, if any. */
  current(key: string): Promise<T> | undefined {
    return this.running.get(key);
  }

  all(): Promise<T>[] {
    return [...this.running.values()];
  }
}
