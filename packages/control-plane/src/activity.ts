import { InFlight } from './in-flight.js';

/**
 * When each session was last used and how many calls on it are under way, for the idle sweep.
 * Kept in memory: losing it on a restart only postpones an idle stop.
 */
export class Activity {
  private readonly lastUsed = new Map<string, number>();
  private readonly calls = new InFlight();

  constructor(private readonly now: () => number = Date.now) {}

  /** Marks a call as started; the returned function marks it finished. */
  begin(sessionId: string): () => void {
    this.lastUsed.set(sessionId, this.now());
    return this.calls.begin(sessionId, () => this.lastUsed.set(sessionId, this.now()));
  }

  busy(sessionId: string): boolean {
    return this.calls.count(sessionId) > 0;
  }

  /** Milliseconds since the session was last used (since `fallback` if never, e.g. after a restart). */
  idleFor(sessionId: string, fallback: number): number {
    return this.now() - (this.lastUsed.get(sessionId) ?? fallback);
  }

  forget(sessionId: string): void {
    this.lastUsed.delete(sessionId);
    this.calls.forget(sessionId);
  }
}
