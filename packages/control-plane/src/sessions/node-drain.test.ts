import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, SpaceError } from '@space/protocol';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { SessionRow, Store } from '../store/store.js';
import type { LifecycleQueue } from './lifecycle-queue.js';
import { NodeDrain } from './node-drain.js';
import type { SessionMover } from './session-mover.js';

/** A drain of `count` sessions on node-1 whose moves take `moveMs` each (the 3rd fails), counting how many run at once. */
function drainOf(count: number, parallel: number, moveMs = 20) {
  const rows = Array.from({ length: count }, (_, i) => ({ id: `ses_${i}`, tenantId: 'tn_a', volumeNodeId: 'node-1' }) as SessionRow);
  const seen = { atOnce: 0, most: 0, statuses: [] as string[], turns: [] as string[] };
  const drain = new NodeDrain({
    store: { listSessionsOnNode: async () => rows, getSession: async (_t: string, id: string) => rows.find((r) => r.id === id) ?? null } as unknown as Store,
    nodes: { setStatus: async (_id: string, status: string) => void seen.statuses.push(status) } as unknown as NodeDirectory,
    lifecycle: { run: async (id: string, op: string, fn: () => Promise<unknown>) => (seen.turns.push(`${op} ${id}`), fn()) } as unknown as LifecycleQueue,
    mover: {
      moveOff: async (row: SessionRow) => {
        seen.most = Math.max(seen.most, ++seen.atOnce);
        await new Promise((resolve) => setTimeout(resolve, moveMs));
        seen.atOnce--;
        if (row.id === 'ses_2') throw new SpaceError(ErrorCode.OBJECT_STORE_UNAVAILABLE, 'no object store answered');
        return { row: { ...row, volumeNodeId: 'node-2' }, note: `moved ${row.id}`, hadSandbox: false };
      },
    } as unknown as SessionMover,
    sessions: { startSandbox: async () => assert.fail('none had a sandbox') },
    log: () => undefined,
    parallel,
  });
  return { drain, seen };
}

test('a drain moves at most SPACE_DRAIN_PARALLEL sessions at once, each in its lifecycle turn; the result lists them in order, a failed one with its reason', async () => {
  const { drain, seen } = drainOf(9, 4);
  const progress: string[] = [];
  const result = await drain.drain('node-1', (line) => progress.push(line));
  assert.equal(seen.most, 4);
  assert.deepEqual(seen.statuses, ['draining']);
  assert.deepEqual(seen.turns.sort(), Array.from({ length: 9 }, (_, i) => `move ses_${i}`).sort());
  assert.deepEqual(
    result.moved.map((m) => m.sessionId),
    ['ses_0', 'ses_1', 'ses_3', 'ses_4', 'ses_5', 'ses_6', 'ses_7', 'ses_8'],
  );
  assert.ok(result.moved.every((m) => m.to === 'node-2'));
  assert.deepEqual(result.failed, [{ sessionId: 'ses_2', code: 'OBJECT_STORE_UNAVAILABLE', message: 'no object store answered' }]);
  assert.deepEqual(
    progress.map((l) => l.split(' ')[0]),
    Array.from({ length: 9 }, (_, i) => `${i + 1}/9`),
    'progress counts what is done',
  );
  assert.ok(progress.some((l) => /ses_2: not moved: no object store answered/.test(l)));
});

test('a drain with SPACE_DRAIN_PARALLEL=1 moves one at a time; one of no sessions finishes at once', async () => {
  const one = drainOf(3, 1);
  await one.drain.drain('node-1');
  assert.equal(one.seen.most, 1);
  const none = drainOf(0, 4);
  assert.deepEqual(await none.drain.drain('node-1'), { nodeId: 'node-1', moved: [], failed: [] });
});
