/**
 * When each session was last used and how many calls on it are under way, for the idle sweep.
 * Kept in memory: losing it on a restart only postpones an idle stop.
 */
export class Activity {
  private readonly lastUsed = new Map<string, number>();
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Marks a call as started; the returned function marks it finished. */
  begin(sessionId: string): () => void {
    this.lastUsed.set(sessionId, this.now());
    this.inFlight.set(sessionId, (this.inFlight.get(sessionId) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.lastUsed.set(sessionId, this.now());
      const left = (this.inFlight.get(sessionId) ?? 1) - 1;
      if (left > 0) this.inFlight.set(sessionId, left);
      else this.inFlight.delete(sessionId);
    };
  }

  busy(sessionId: string): boolean {
    return this.inFlight.has(sessionId);
  }

  /** Milliseconds since the session was last used (since `fallback` if never, e.g. after a restart). */
  idleFor(sessionId: string, fallback: number): number {
    return this.now() - (this.lastUsed.get(sessionId) ?? fallback);
  }

  forget(sessionId: string): void {
    this.lastUsed.delete(sessionId);
    this.inFlight.delete(sessionId);
  }
}
