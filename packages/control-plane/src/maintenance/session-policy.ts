import type { SessionRow } from '../store/store.js';

/** The shortest interval between automatic full checkpoints of a busy sandbox, however cheap they are. */
export const minBusyFullIntervalMs = 10_000;

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
 *   volume changed.
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
  // Since the newest checkpoint (or the sandbox's start, or a later moment that counts as one).
  const started = Date.parse(row.sandboxStartedAt ?? row.createdAt);
  const since = (...marks: (number | null)[]) => now - Math.max(started, ...marks.map((m) => m ?? 0));
  const full = fullDue(facts, since(facts.newestFull?.at ?? null, facts.fullTriedAt), pauseShare);
  const fs = row.checkpointIntervalSec > 0 && since(facts.newestAt, facts.unchangedAt) >= row.checkpointIntervalSec * 1000;
  return full || fs ? { action: 'checkpoint', full, fs } : { action: 'none' };
}

function fullDue(facts: SessionFacts, sinceFullMs: number, pauseShare: number): 'due' | 'if-changed' | null {
  const intervalSec = facts.row.fullCheckpointIntervalSec;
  if (intervalSec <= 0) return null;
  if (sinceFullMs >= intervalSec * 1000) return 'due';
  const pauseMs = facts.newestFull?.pauseMs;
  if (!pauseMs) return null;
  return sinceFullMs >= Math.max(minBusyFullIntervalMs, pauseMs / pauseShare) ? 'if-changed' : null;
}
