import type { SessionRow } from '../store/store.js';

/** The shortest interval between automatic full checkpoints of a busy sandbox, however cheap they are. */
export const minBusyFullIntervalMs = 10_000;

/**
 * The longest a running session goes without a visit even when nothing is due by its facts: what the
 * store does not see (a checkpoint deleted, another control plane's memory of a try) is looked at again
 * within it.
 */
export const maxMaintenanceGapMs = 300_000;

/** What the policy looks at: a session's row and what maintenance knows about it, times in ms since the epoch. */
export interface SessionFacts {
  row: Pick<
    SessionRow,
    | 'status'
    | 'sandboxId'
    | 'createdAt'
    | 'sandboxStartedAt'
    | 'lastActiveAt'
    | 'expiresAt'
    | 'idleTimeoutSec'
    | 'checkpointIntervalSec'
    | 'fullCheckpointIntervalSec'
  >;
  /** Whether the session's node listed its sandbox in this pass. */
  sandboxListed: boolean;
  /** The newest checkpoint of any kind, and the newest full one with the pause it cost. */
  newestAt: number | null;
  newestFull: { at: number; pauseMs: number | null } | null;
  /** The last call through this control plane (other control planes' are in `lastActiveAt`). */
  lastUsedAt: number | null;
  /** When a full checkpoint was last tried or found needless (no process ran): not again before an interval. */
  fullTriedAt: number | null;
  /** When the volume was last found unchanged since the newest checkpoint: counts as one for the interval. */
  unchangedAt: number | null;
  /** When an idle stop was last given up (a full checkpoint refused while processes ran). */
  idleRefusedAt: number | null;
  /**
   * Its node listed the sandbox quiet since its newest checkpoint: nothing came in since, and no
   * process ran, so its volume is as that checkpoint has it until something comes in (the pass sees
   * that in the node's list: `lookAfterWriteMs`).
   */
  quiet: boolean;
}

/**
 * What is due for a session, first match wins:
 * - `undo-start`: a start a crash interrupted (`starting` while no one holds the session);
 * - `confirm-gone`: the node did not list its sandbox: ask once more, then forget it;
 * - `expire`: its timeout passed (deleted or paused, as its `onTimeout` says);
 * - `stop-idle`: idle for `idleTimeoutSec`: a full checkpoint, then the sandbox stops;
 * - `checkpoint`: `full` is `due` after `fullCheckpointIntervalSec`, or `if-changed` after the busy
 *   interval (the newest full checkpoint's pause / `pauseShare`, at least 10 s) when the volume was
 *   written since; either is taken only if processes run. `fs` after `checkpointIntervalSec`, if the
 *   volume changed. When each comes due: `dueMarks`.
 */
export type SessionDue =
  | { action: 'none' | 'undo-start' | 'confirm-gone' | 'expire' | 'stop-idle' }
  | { action: 'checkpoint'; full: 'due' | 'if-changed' | null; fs: boolean };

/** Milliseconds a session has been idle: since its last use through any control plane, its sandbox's start, or a given-up idle stop. */
export function idleForMs(facts: Pick<SessionFacts, 'row' | 'lastUsedAt' | 'idleRefusedAt'>, now: number): number {
  const { row } = facts;
  const lastUse = Math.max(
    facts.lastUsedAt ?? 0,
    row.lastActiveAt ? Date.parse(row.lastActiveAt) : 0,
    Date.parse(row.sandboxStartedAt ?? row.createdAt),
    facts.idleRefusedAt ?? 0,
  );
  return now - lastUse;
}

/** What is due for one session at `now`: a pure function of its facts, so it is tested without any store or node. */
export function sessionDue(facts: SessionFacts, now: number, pauseShare: number): SessionDue {
  const { row } = facts;
  if (row.status === 'starting') return { action: 'undo-start' };
  if (row.sandboxId && !facts.sandboxListed) return { action: 'confirm-gone' };
  if (row.expiresAt && Date.parse(row.expiresAt) <= now) return { action: 'expire' };
  if (row.status !== 'running' || !row.sandboxId) return { action: 'none' };
  if (row.idleTimeoutSec > 0 && idleForMs(facts, now) >= row.idleTimeoutSec * 1000) return { action: 'stop-idle' };
  const marks = dueMarks(facts, pauseShare);
  const passed = (mark: number | null) => mark !== null && mark <= now;
  const full = passed(marks.full) ? 'due' : passed(marks.fullIfChanged) ? 'if-changed' : null;
  const fs = passed(marks.fs);
  return full || fs ? { action: 'checkpoint', full, fs } : { action: 'none' };
}

/**
 * When something next comes due for a session by these facts, if nothing changes meanwhile (ms since
 * the epoch): what maintenance records so that a pass visits only the sessions something is due for.
 * Anything that makes it sooner (a new sandbox, a timeout set) is a change of the session's row,
 * which makes it due at once; a call only makes an idle stop later. At most `maxMaintenanceGapMs` away.
 * A quiet sandbox needs no checkpoint until something comes into it: only its idle stop and timeout
 * count, and the pass that sees it written again looks at it then (`lookAfterWriteMs`).
 */
export function nextDueAt(facts: SessionFacts, now: number, pauseShare: number): number {
  const { row } = facts;
  const marks = [now + maxMaintenanceGapMs];
  if (row.expiresAt) marks.push(Date.parse(row.expiresAt));
  if (row.status === 'running' && row.sandboxId) {
    if (row.idleTimeoutSec > 0) marks.push(now - idleForMs(facts, now) + row.idleTimeoutSec * 1000);
    const { full, fullIfChanged, fs } = dueMarks(facts, pauseShare);
    if (!facts.quiet) for (const mark of [full, fullIfChanged, fs]) if (mark !== null) marks.push(mark);
  }
  return Math.min(...marks);
}

/**
 * How soon a session's next visit must come once its sandbox is no longer quiet: its shortest
 * checkpoint interval turned on (a visit worked out while it was not quiet is never further away);
 * null when it takes no automatic checkpoints. A pass that finds a sandbox no longer quiet whose
 * next visit is further away than this looks at it at once.
 */
export function lookAfterWriteMs(row: Pick<SessionFacts['row'], 'checkpointIntervalSec' | 'fullCheckpointIntervalSec'>): number | null {
  const on = [row.checkpointIntervalSec, row.fullCheckpointIntervalSec].filter((sec) => sec > 0);
  return on.length ? Math.min(...on) * 1000 : null;
}

/**
 * When each automatic checkpoint comes due (null: never): `full` after `fullCheckpointIntervalSec`
 * since the newest full one or the last try; `fullIfChanged` after the busy interval (the newest full
 * checkpoint's pause / `pauseShare`, at least 10 s) since then or since the volume was found
 * unchanged; `fs` after `checkpointIntervalSec` since the newest checkpoint or the volume found
 * unchanged. Each counts from the sandbox's start at the earliest.
 */
function dueMarks(facts: SessionFacts, pauseShare: number): { full: number | null; fullIfChanged: number | null; fs: number | null } {
  const { row } = facts;
  const started = Date.parse(row.sandboxStartedAt ?? row.createdAt);
  const after = (ms: number, ...marks: (number | null)[]) => Math.max(started, ...marks.map((m) => m ?? 0)) + ms;
  const fullSec = row.fullCheckpointIntervalSec;
  const pauseMs = facts.newestFull?.pauseMs;
  const sinceFull = [facts.newestFull?.at ?? null, facts.fullTriedAt];
  return {
    full: fullSec > 0 ? after(fullSec * 1000, ...sinceFull) : null,
    fullIfChanged: fullSec > 0 && pauseMs ? after(Math.max(minBusyFullIntervalMs, pauseMs / pauseShare), ...sinceFull, facts.unchangedAt) : null,
    fs: row.checkpointIntervalSec > 0 ? after(row.checkpointIntervalSec * 1000, facts.newestAt, facts.unchangedAt) : null,
  };
}
