/** One creation (or a fork of `count`) waiting for room. */
interface Waiter {
  count: number;
  /** Called with what ends the creations once they are admitted. */
  admit: (end: () => void) => void;
  timer: NodeJS.Timeout;
}

/**
 * The tenants' creations waiting for room under their limit on creations at once, first come first
 * served per tenant: a creation arriving while others wait queues behind them, so a burst is served
 * in order instead of the first ones refused. Bounded in creations waiting and in how long each
 * waits; the caller refuses past either.
 */
export class CreateQueue {
  private readonly queues = new Map<string, Waiter[]>();

  /** How many creations of the tenant wait now. */
  waiting(tenantId: string): number {
    return (this.queues.get(tenantId) ?? []).reduce((n, w) => n + w.count, 0);
  }

  /**
   * Waits until `pump` admits this creation, in arrival order, and resolves with what ends it;
   * rejects with `timedOut()` after `waitMs` (the creation leaves the queue, not admitted).
   */
  wait(tenantId: string, count: number, waitMs: number, timedOut: () => Error): Promise<() => void> {
    return new Promise((resolve, reject) => {
      const queue = this.queues.get(tenantId) ?? [];
      const waiter: Waiter = {
        count,
        admit: resolve,
        timer: setTimeout(() => {
          const left = (this.queues.get(tenantId) ?? []).filter((w) => w !== waiter);
          if (left.length) this.queues.set(tenantId, left);
          else this.queues.delete(tenantId);
          reject(timedOut());
        }, waitMs),
      };
      waiter.timer.unref();
      queue.push(waiter);
      this.queues.set(tenantId, queue);
    });
  }

  /** Admits the waiting creations of the tenant, oldest first, while `fits` says the next one has room; `begin` counts one in. */
  pump(tenantId: string, fits: (count: number) => boolean, begin: (count: number) => () => void): void {
    const queue = this.queues.get(tenantId);
    while (queue?.length && fits(queue[0]!.count)) {
      const waiter = queue.shift()!;
      clearTimeout(waiter.timer);
      waiter.admit(begin(waiter.count));
    }
    if (queue && queue.length === 0) this.queues.delete(tenantId);
  }
}
