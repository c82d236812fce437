import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HeartbeatWrites } from './heartbeat-writes.js';
import { openSqliteStore } from '../store/open-store.js';
import type { HeartbeatRow } from '../store/store.js';

const row = (id: string, sandboxes = 0): HeartbeatRow => ({
  id,
  url: `https://${id}.invalid`,
  token: `sealed-${id}`,
  capacity: { memoryMb: 4096, cpus: 2 },
  storage: 'ok',
  sandboxes,
  lastHeartbeatAt: '2026-01-01T00:00:00Z',
});

/** A real store whose heartbeat writes are recorded as they reach it. */
async function recordedStore() {
  const store = await openSqliteStore(':memory:');
  const writes: string[][] = [];
  const recordHeartbeats = async (rows: HeartbeatRow[]) => {
    writes.push(rows.map((r) => `${r.id}:${r.sandboxes}`));
    await store.recordHeartbeats(rows);
  };
  return { store, writes, recordHeartbeats };
}

test('heartbeats within the window are one write, in the order of their node ids, a node beating twice with its newest row; each is answered once its row is stored', async () => {
  const { store, writes, recordHeartbeats } = await recordedStore();
  const heartbeats = new HeartbeatWrites({ recordHeartbeats }, 50);
  const started = Date.now();
  const answered: string[] = [];
  const beat = (r: HeartbeatRow) =>
    heartbeats.write(r).then(async () => {
      assert.equal((await store.getNode(r.id))?.id, r.id, 'stored before it is answered');
      answered.push(r.id);
    });
  await Promise.all([beat(row('node-c')), beat(row('node-a', 1)), beat(row('node-b')), beat(row('node-a', 2))]);
  assert.ok(Date.now() - started >= 45, 'the first waited for the window');
  assert.deepEqual(writes, [['node-a:2', 'node-b:0', 'node-c:0']]);
  assert.deepEqual(answered.sort(), ['node-a', 'node-a', 'node-b', 'node-c']);
  assert.equal((await store.getNode('node-a'))?.sandboxes, 2);

  await beat(row('node-b', 5));
  assert.deepEqual(writes.at(-1), ['node-b:5'], 'a later beat starts a window of its own');
  await store.close();
});

test("a failed write fails every heartbeat in it, and the next window's write is tried anew", async () => {
  const { store, recordHeartbeats } = await recordedStore();
  let fail = true;
  const heartbeats = new HeartbeatWrites(
    {
      recordHeartbeats: (rows) => {
        if (fail) return Promise.reject(new Error('the store is down'));
        return recordHeartbeats(rows);
      },
    },
    0,
  );
  const results = await Promise.allSettled([heartbeats.write(row('node-a')), heartbeats.write(row('node-b'))]);
  assert.deepEqual(
    results.map((r) => r.status === 'rejected' && (r.reason as Error).message),
    ['the store is down', 'the store is down'],
  );
  fail = false;
  await heartbeats.write(row('node-a'));
  assert.deepEqual(
    (await store.listNodes()).map((n) => n.id),
    ['node-a'],
  );
  await store.close();
});

test('a window of 1,200 heartbeats is written 500 rows a statement', async () => {
  const { store, writes, recordHeartbeats } = await recordedStore();
  const heartbeats = new HeartbeatWrites({ recordHeartbeats }, 0);
  await Promise.all(Array.from({ length: 1200 }, (_, i) => heartbeats.write(row(`node-${String(i).padStart(4, '0')}`))));
  assert.deepEqual(
    writes.map((w) => w.length),
    [500, 500, 200],
  );
  assert.equal((await store.listNodes()).length, 1200);
  await store.close();
});
