/** At most this many takes are remembered per template: a bound, far above any real rate. */
const maxRemembered = 10_000;

/**
 * Recent demand for pooled sandboxes, per template: how many sessions asked for one (served or
 * not) within the last window. A pool that sizes itself keeps that many ready, so a repeat of the
 * recent burst is served from the pool.
 */
export class PoolDemand {
  private readonly takes = new Map<string, number[]>();

  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  record(template: string): void {
    const times = this.takes.get(template) ?? [];
    times.push(this.now());
    if (times.length > maxRemembered) times.splice(0, times.length - maxRemembered);
    this.takes.set(template, times);
  }

  /** Sessions that asked for a sandbox of the template within the window. */
  recent(template: string): number {
    const times = this.takes.get(template);
    if (!times) return 0;
    const since = this.now() - this.windowMs;
    while (times.length > 0 && times[0]! < since) times.shift();
    return times.length;
  }
}
