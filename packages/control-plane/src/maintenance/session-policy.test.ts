import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type SessionFacts, idleForMs, lookAfterWriteMs, maxMaintenanceGapMs, nextDueAt, sessionDue } from './session-policy.js';

const t0 = Date.parse('2026-12-01T10:00:00Z');
const s = 1000;
const at = (ms: number) => new Date(ms).toISOString();

/** A running session whose sandbox started at t0, checkpoints every 60 s, full ones every 300 s, idle stop after 600 s. */
function facts(changes: Omit<Partial<SessionFacts>, 'row'> & { row?: Partial<SessionFacts['row']> } = {}): SessionFacts {
  const { row, ...rest } = changes;
  return {
    row: {
      status: 'running',
      sandboxId: 'sbx_1',
      createdAt: at(t0 - 60 * s),
      sandboxStartedAt: at(t0),
      lastActiveAt: null,
      expiresAt: null,
      idleTimeoutSec: 600,
      checkpointIntervalSec: 60,
      fullCheckpointIntervalSec: 300,
      ...row,
    },
    sandboxListed: true,
    newestAt: null,
    newestFull: null,
    lastUsedAt: null,
    fullTriedAt: null,
    unchangedAt: null,
    idleRefusedAt: null,
    quiet: false,
    ...rest,
  };
}
const due = (f: SessionFacts, now: number, share = 0.02) => sessionDue(f, now, share);

test('reconciliation comes first: an interrupted start, then a sandbox its node did not list', () => {
  assert.deepEqual(due(facts({ row: { status: 'starting' }, sandboxListed: false }), t0), { action: 'undo-start' });
  assert.deepEqual(due(facts({ sandboxListed: false, row: { expiresAt: at(t0 - s) } }), t0), { action: 'confirm-gone' });
  // A session with no sandbox has nothing to confirm.
  assert.deepEqual(due(facts({ sandboxListed: false, row: { status: 'stopped', sandboxId: null } }), t0 + 3600 * s), { action: 'none' });
});

test('expiry: a passed timeout, whatever the status, but not a future one', () => {
  assert.deepEqual(due(facts({ row: { expiresAt: at(t0 + 10 * s) } }), t0 + 10 * s), { action: 'expire' });
  assert.deepEqual(due(facts({ row: { status: 'stopped', sandboxId: null, expiresAt: at(t0) } }), t0 + s), { action: 'expire' });
  assert.notDeepEqual(due(facts({ row: { expiresAt: at(t0 + 11 * s) } }), t0 + 10 * s), { action: 'expire' });
});

test('only a running session with a sandbox gets checkpoints or idle stops', () => {
  for (const status of ['stopped', 'idle', 'failed'] as const)
    assert.deepEqual(due(facts({ row: { status, sandboxId: null } }), t0 + 3600 * s), { action: 'none' });
});

test('idle stop after idleTimeoutSec without use through any control plane; 0 turns it off', () => {
  assert.deepEqual(due(facts(), t0 + 600 * s), { action: 'stop-idle' });
  assert.equal(due(facts(), t0 + 599 * s).action, 'checkpoint');
  // Used here, used through another control plane, or a stop given up: each restarts the count.
  assert.notEqual(due(facts({ lastUsedAt: t0 + 100 * s }), t0 + 600 * s).action, 'stop-idle');
  assert.notEqual(due(facts({ row: { lastActiveAt: at(t0 + 100 * s) } }), t0 + 600 * s).action, 'stop-idle');
  assert.notEqual(due(facts({ idleRefusedAt: t0 + 100 * s }), t0 + 600 * s).action, 'stop-idle');
  assert.equal(idleForMs(facts({ lastUsedAt: t0 + 100 * s }), t0 + 700 * s), 600 * s);
  assert.notEqual(due(facts({ row: { idleTimeoutSec: 0 } }), t0 + 36_000 * s).action, 'stop-idle');
});

test('fs checkpoints every checkpointIntervalSec since the newest one, the start, or the volume found unchanged', () => {
  assert.deepEqual(due(facts(), t0 + 59 * s), { action: 'none' });
  assert.deepEqual(due(facts(), t0 + 60 * s), { action: 'checkpoint', full: null, fs: true });
  assert.deepEqual(due(facts({ newestAt: t0 + 30 * s }), t0 + 60 * s), { action: 'none' });
  assert.deepEqual(due(facts({ newestAt: t0 + 30 * s, unchangedAt: t0 + 80 * s }), t0 + 120 * s), { action: 'none' });
  assert.deepEqual(due(facts({ newestAt: t0 + 30 * s, unchangedAt: t0 + 80 * s }), t0 + 140 * s), { action: 'checkpoint', full: null, fs: true });
  assert.deepEqual(due(facts({ row: { checkpointIntervalSec: 0 } }), t0 + 299 * s), { action: 'none' });
});

test('full checkpoints every fullCheckpointIntervalSec since the newest full one or the last try; 0 turns them off', () => {
  assert.deepEqual(due(facts({ newestAt: t0 + 250 * s }), t0 + 300 * s), { action: 'checkpoint', full: 'due', fs: false });
  const full = { at: t0 + 100 * s, pauseMs: null };
  assert.deepEqual(due(facts({ newestAt: t0 + 100 * s, newestFull: full }), t0 + 399 * s), { action: 'checkpoint', full: null, fs: true });
  assert.deepEqual(due(facts({ newestAt: t0 + 360 * s, newestFull: full }), t0 + 400 * s), { action: 'checkpoint', full: 'due', fs: false });
  // Tried at +350 s (no process ran, or it was refused): not again for an interval.
  assert.equal(due(facts({ newestAt: t0 + 360 * s, newestFull: full, fullTriedAt: t0 + 350 * s }), t0 + 400 * s).action, 'none');
  assert.equal(due(facts({ newestAt: t0 + 360 * s, row: { fullCheckpointIntervalSec: 0 } }), t0 + 400 * s).action, 'none');
});

test('while the volume is written, full checkpoints come as often as their pause allows within the share, never more than every 10 s', () => {
  // 400 ms pauses at 2%: every 20 s, if the volume changed.
  const newestFull = { at: t0, pauseMs: 400 };
  assert.deepEqual(due(facts({ newestAt: t0 + 15 * s, newestFull }), t0 + 19 * s), { action: 'none' });
  assert.deepEqual(due(facts({ newestAt: t0 + 15 * s, newestFull }), t0 + 20 * s), { action: 'checkpoint', full: 'if-changed', fs: false });
  // 2% of a 100 ms pause would be every 5 s: held to 10 s.
  const cheap = { at: t0, pauseMs: 100 };
  assert.deepEqual(due(facts({ newestAt: t0 + 5 * s, newestFull: cheap }), t0 + 9 * s), { action: 'none' });
  assert.deepEqual(due(facts({ newestAt: t0 + 5 * s, newestFull: cheap }), t0 + 10 * s), { action: 'checkpoint', full: 'if-changed', fs: false });
  // A larger share allows more: 10% of 4 s is every 40 s instead of 200 s.
  const dear = { at: t0, pauseMs: 4000 };
  assert.deepEqual(due(facts({ newestAt: t0 + 30 * s, newestFull: dear }), t0 + 40 * s, 0.1), { action: 'checkpoint', full: 'if-changed', fs: false });
  assert.deepEqual(due(facts({ newestAt: t0 + 30 * s, newestFull: dear }), t0 + 40 * s, 0.02), { action: 'none' });
  // Both kinds can be due: full is tried first (if processes run), fs otherwise.
  assert.deepEqual(due(facts({ newestFull }), t0 + 60 * s), { action: 'checkpoint', full: 'if-changed', fs: true });
});

test('the next visit is due at the first of: an fs or full checkpoint, the busy look, the idle stop, the timeout; at most a gap away', () => {
  const next = (f: SessionFacts, now: number, share = 0.02) => nextDueAt(f, now, share);
  // fs at 60 s from the start comes before full (300 s) and idle (600 s).
  assert.equal(next(facts(), t0 + 5 * s), t0 + 60 * s);
  assert.equal(next(facts({ newestAt: t0 + 50 * s }), t0 + 55 * s), t0 + 110 * s);
  assert.equal(next(facts({ newestAt: t0 + 50 * s, unchangedAt: t0 + 110 * s }), t0 + 110 * s), t0 + 170 * s, 'unchanged: counts from the look');
  // The busy look: 400 ms pauses at 2% are 20 s, from the newest full checkpoint or the last look that found the volume unchanged.
  const newestFull = { at: t0 + 100 * s, pauseMs: 400 };
  assert.equal(next(facts({ newestAt: t0 + 100 * s, newestFull }), t0 + 101 * s), t0 + 120 * s);
  assert.equal(next(facts({ newestAt: t0 + 100 * s, newestFull, unchangedAt: t0 + 125 * s }), t0 + 125 * s), t0 + 145 * s);
  // Each mark is what sessionDue acts on at that moment.
  const f = facts({ newestAt: t0 + 100 * s, newestFull, unchangedAt: t0 + 125 * s });
  assert.equal(due(f, t0 + 144 * s).action, 'none');
  assert.deepEqual(due(f, t0 + 145 * s), { action: 'checkpoint', full: 'if-changed', fs: false });
  // Idle stop and timeout, when sooner; nothing scheduled at all: the gap.
  const quiet = { row: { checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 } };
  assert.equal(next(facts({ row: { ...quiet.row, idleTimeoutSec: 120 }, lastUsedAt: t0 + 30 * s }), t0 + 40 * s), t0 + 150 * s);
  assert.equal(next(facts({ ...quiet, lastUsedAt: t0 + 30 * s }), t0 + 40 * s), t0 + 40 * s + maxMaintenanceGapMs, 'idle stop (630 s) beyond the gap');
  assert.equal(next(facts({ row: { ...quiet.row, expiresAt: at(t0 + 90 * s) } }), t0 + 40 * s), t0 + 90 * s);
  assert.equal(next(facts({ row: { ...quiet.row, idleTimeoutSec: 0 } }), t0 + 40 * s), t0 + 40 * s + maxMaintenanceGapMs);
  // A quiet sandbox: no checkpoint marks, only its idle stop (600 s after its start), or the gap.
  assert.equal(next(facts({ newestAt: t0 + 50 * s, quiet: true }), t0 + 400 * s), t0 + 600 * s);
  assert.equal(next(facts({ newestAt: t0 + 50 * s, quiet: true, row: { idleTimeoutSec: 0 } }), t0 + 110 * s), t0 + 110 * s + maxMaintenanceGapMs);
  assert.deepEqual(
    [
      lookAfterWriteMs({ checkpointIntervalSec: 60, fullCheckpointIntervalSec: 300 }),
      lookAfterWriteMs({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 300 }),
    ],
    [60 * s, 300 * s],
  );
  assert.equal(lookAfterWriteMs({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 }), null, 'no automatic checkpoints: never');
  // A session without a sandbox: only its timeout.
  assert.equal(next(facts({ row: { status: 'stopped', sandboxId: null, expiresAt: at(t0 + 90 * s) } }), t0), t0 + 90 * s);
});

test('the policy reads nothing but its arguments', () => {
  const f = facts({ newestAt: t0, newestFull: { at: t0, pauseMs: 400 } });
  const frozen = structuredClone(f);
  assert.deepEqual(due(f, t0 + 30 * s), due(f, t0 + 30 * s));
  assert.deepEqual(f, frozen);
});
