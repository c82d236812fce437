/** At most this many takes are remembered per template: a bound, far above any real rate. */
const maxRemembered = 10_000;

/**
 * Recent demand for pooled sandboxes, per template, as the burst a pool should be ready for: the
 * most sessions that asked for one (served or not) within any `burstWindowMs`, remembered for
 * `memoryMs` and fading linearly over it once its window has passed. A burst of 100 within a
 * minute asks for 100 ready until a minute after its last take, then, with a 10-minute memory, 50
 * four and a half minutes later and none once the memory has passed: a repeat of a recent burst
 * finds the pool ready, and a pool nobody uses shrinks back by itself.
 */
export class PoolDemand {
  private readonly takes = new Map<string, number[]>();

  constructor(
    private readonly burstWindowMs: number,
    private readonly memoryMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  record(template: string): void {
    const times = this.takes.get(template) ?? [];
    times.push(this.now());
    if (times.length > maxRemembered) times.splice(0, times.length - maxRemembered);
    this.takes.set(template, times);
  }

  /** The burst to be ready for: each remembered burst's size, faded by its age, the largest. */
  burst(template: string): number {
    const times = this.takes.get(template);
    if (!times) return 0;
    const now = this.now();
    const memory = Math.max(this.memoryMs, this.burstWindowMs);
    while (times.length > 0 && times[0]! <= now - memory) times.shift();
    let largest = 0;
    // Times ascend: for each take, the takes within the window that ends with it (two pointers).
    for (let first = 0, last = 0; last < times.length; last++) {
      while (times[first]! <= times[last]! - this.burstWindowMs) first++;
      const age = now - times[last]!;
      // Within the window a burst counts in full; past it, it fades out over the rest of the memory.
      const weight = age <= this.burstWindowMs ? 1 : 1 - (age - this.burstWindowMs) / (memory - this.burstWindowMs);
      largest = Math.max(largest, Math.ceil((last - first + 1) * weight));
    }
    return largest;
  }
}
