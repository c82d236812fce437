import { InFlight } from '../tenants/in-flight.js';
import type { Store } from '../store/store.js';

/** Writes "session used at" where every control plane sees it; may reject (ignored: the next use writes again). */
export type ActivityRecorder = (sessionId: string, at: number) => Promise<void>;

/** Use recorded in the session's row, which every control plane's maintenance reads. */
export function recordActivityIn(store: Store): ActivityRecorder {
  return (sessionId, at) => store.updateSession(sessionId, { lastActiveAt: new Date(at).toISOString() });
}

/**
 * When each session was last used and how many calls on it are under way, for the idle sweep.
 * Calls are counted in this process; the time of use is also recorded through `record` (at most
 * once per `recordEveryMs` per session, and for calls still open by `recordOpenCalls`), so another
 * control plane never finds a session idle that this one is serving.
 */
export class Activity {
  private readonly lastUsed = new Map<string, number>();
  private readonly lastRecorded = new Map<string, number>();
  private readonly calls = new InFlight();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly record: ActivityRecorder = async () => undefined,
    private readonly recordEveryMs = 5000,
  ) {}

  /** Marks a call as started; the returned function marks it finished. */
  begin(sessionId: string): () => void {
    this.used(sessionId);
    return this.calls.begin(sessionId, () => this.used(sessionId));
  }

  busy(sessionId: string): boolean {
    return this.calls.count(sessionId) > 0;
  }

  /** When this process last saw the session used; null if never (since it started). */
  lastUsedAt(sessionId: string): number | null {
    return this.lastUsed.get(sessionId) ?? null;
  }

  /** Records every session with a call open now (a long stream is use all along); run once per maintenance pass. */
  async recordOpenCalls(): Promise<void> {
    for (const id of this.calls.keys()) await this.record(id, this.now()).catch(() => undefined);
  }

  forget(sessionId: string): void {
    this.lastUsed.delete(sessionId);
    this.lastRecorded.delete(sessionId);
    this.calls.forget(sessionId);
  }

  private used(sessionId: string): void {
    const now = this.now();
    this.lastUsed.set(sessionId, now);
    if (now - (this.lastRecorded.get(sessionId) ?? 0) < this.recordEveryMs) return;
    this.lastRecorded.set(sessionId, now);
    this.record(sessionId, now).catch(() => undefined);
  }
}
