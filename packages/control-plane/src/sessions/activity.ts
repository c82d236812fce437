import { InFlight } from '../tenants/in-flight.js';
import type { Store } from '../store/store.js';

/** Writes "sessions used at" (ms since the epoch, by session id) where every control plane sees it; may reject (ignored: the next use writes again). */
export type ActivityRecorder = (uses: ReadonlyMap<string, number>) => Promise<void>;

/** Use recorded in the sessions' rows, which every control plane's maintenance reads: one statement for a batch. */
export function recordActivityIn(store: Store): ActivityRecorder {
  return (uses) => store.recordSessionsUsed(uses);
}

export interface ActivityOptions {
  /** A session's use is recorded at most this often (the idle sweep's granularity across control planes). */
  recordEveryMs: number;
  /** Uses due for recording wait this long to be written together, in one statement for all sessions. */
  batchDelayMs: number;
}

const defaultActivityOptions: ActivityOptions = { recordEveryMs: 5000, batchDelayMs: 200 };

/**
 * When each session was last used and how many calls on it are under way, for the idle sweep.
 * Calls are counted in this process; the time of use is also recorded through `record` (at most
 * once per `recordEveryMs` per session, and for calls still open by `recordOpenCalls`), so another
 * control plane never finds a session idle that this one is serving. Uses are written in batches:
 * a control plane serving thousands of sessions writes one statement per batch, not one per session.
 */
export class Activity {
  private readonly lastUsed = new Map<string, number>();
  private readonly lastRecorded = new Map<string, number>();
  private readonly calls = new InFlight();
  /** Uses due for recording, written by the next batch. */
  private pending = new Map<string, number>();
  private batch: NodeJS.Timeout | null = null;
  private readonly options: ActivityOptions;

  constructor(
    private readonly now: () => number = Date.now,
    private readonly record: ActivityRecorder = async () => undefined,
    options: Partial<ActivityOptions> = {},
  ) {
    this.options = { ...defaultActivityOptions, ...options };
  }

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
    for (const id of this.calls.keys()) this.pending.set(id, this.now());
    await this.flush();
  }

  /** Writes the uses waiting for their batch now (also what a stopping control plane does last). */
  async flush(): Promise<void> {
    if (this.batch) clearTimeout(this.batch);
    this.batch = null;
    if (this.pending.size === 0) return;
    const uses = this.pending;
    this.pending = new Map();
    await this.record(uses).catch(() => undefined);
  }

  forget(sessionId: string): void {
    this.lastUsed.delete(sessionId);
    this.lastRecorded.delete(sessionId);
    this.pending.delete(sessionId);
    this.calls.forget(sessionId);
  }

  private used(sessionId: string): void {
    const now = this.now();
    this.lastUsed.set(sessionId, now);
    if (now - (this.lastRecorded.get(sessionId) ?? 0) < this.options.recordEveryMs) return;
    this.lastRecorded.set(sessionId, now);
    this.pending.set(sessionId, now);
    // Unreferenced: a batch never keeps the process alive (a stopping control plane flushes instead).
    this.batch ??= setTimeout(() => void this.flush(), this.options.batchDelayMs).unref();
  }
}
