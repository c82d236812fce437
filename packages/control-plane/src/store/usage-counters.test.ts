import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import pg from 'pg';
import { storeEngines } from '../test-support/store-engines.js';
import { session } from '../test-support/store-rows.js';

const engines = storeEngines();

/** Until `client`'s statement waits for a lock another transaction holds. */
async function untilWaitingForLock(observer: pg.Client, client: pg.Client & { processID?: number }): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const found = await observer.query('SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1', [client.processID]);
    if (found.rows[0]?.wait_event_type === 'Lock') return;
    await sleep(25);
  }
  throw new Error('the statement never waited for a lock');
}

test('postgres: status changes in opposite directions on one shard take the counter rows in one order and never deadlock', async () => {
  const store = await engines.postgres.open('counter-order');
  const url = await engines.postgres.location('counter-order');
  await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
  // One last character: one shard, so the three share each status's counter row. Statuses that
  // do not count on a node, so only `status_counts` is locked.
  const inactive = { sandboxId: null, nodeId: null, sandboxStartedAt: null };
  await store.insertSession({ ...session('ses_y0', 'tn_a'), ...inactive, status: 'idle' });
  await store.insertSession({ ...session('ses_x0', 'tn_a'), ...inactive, status: 'stopped' });
  await store.insertSession({ ...session('ses_z0', 'tn_a'), ...inactive, status: 'failed' });
  const [a, b, observer] = [new pg.Client(url), new pg.Client(url), new pg.Client(url)];
  // A failed run's clients may see the server stop before they end: the test's own error is the one told.
  for (const client of [a, b, observer]) client.on('error', () => undefined);
  try {
    await Promise.all([a.connect(), b.connect(), observer.connect()]);
    await a.query('BEGIN');
    // Counter rows are locked at commit (migration 31); at once here, so A holds them while B comes.
    await a.query('SET CONSTRAINTS ALL IMMEDIATE');
    // A holds the rows of `idle` and `failed`.
    await a.query("UPDATE sessions SET status = 'failed' WHERE id = 'ses_y0'");
    // B's change (at its commit) waits for `idle`. Taken old status first, it held `stopped` while it waited...
    const bChange = b.query("UPDATE sessions SET status = 'idle' WHERE id = 'ses_x0'");
    await untilWaitingForLock(observer, b);
    // ...which A needs now: each would wait for the other. In one order, B holds nothing yet.
    await a.query("UPDATE sessions SET status = 'stopped' WHERE id = 'ses_z0'");
    await a.query('COMMIT');
    await bChange;
    assert.deepEqual(await store.countSessionsByStatus(), { failed: 1, idle: 1, stopped: 1 });
  } finally {
    await Promise.all([a, b, observer].map((c) => c.end().catch(() => undefined)));
  }
});

test('postgres: a status change holds its counter rows only while it commits: a transaction left open does not hold up another change of the same statuses', async () => {
  const store = await engines.postgres.open('counter-deferred');
  const url = await engines.postgres.location('counter-deferred');
  await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
  // One shard, as above: the two changes share the counter rows of `idle` and `failed`.
  const inactive = { sandboxId: null, nodeId: null, sandboxStartedAt: null };
  await store.insertSession({ ...session('ses_y0', 'tn_a'), ...inactive, status: 'idle' });
  await store.insertSession({ ...session('ses_x0', 'tn_a'), ...inactive, status: 'idle' });
  const [a, b] = [new pg.Client(url), new pg.Client(url)];
  for (const client of [a, b]) client.on('error', () => undefined);
  try {
    await Promise.all([a.connect(), b.connect()]);
    // As a start's transaction: its status changed, its history row and commit still to come.
    await a.query('BEGIN');
    await a.query("UPDATE sessions SET status = 'failed' WHERE id = 'ses_y0'");
    // Locked with the statement, B would wait for A's commit: it gives up after 2 s instead.
    await b.query("SET lock_timeout = '2s'");
    await b.query("UPDATE sessions SET status = 'failed' WHERE id = 'ses_x0'");
    assert.deepEqual(await store.countSessionsByStatus(), { failed: 1, idle: 1 }, "B's change counted, A's not yet");
    await a.query('COMMIT');
    assert.deepEqual(await store.countSessionsByStatus(), { failed: 2 });
    // A rolled back change is never counted.
    await a.query('BEGIN');
    await a.query("UPDATE sessions SET status = 'stopped' WHERE id = 'ses_y0'");
    await a.query('ROLLBACK');
    assert.deepEqual(await store.countSessionsByStatus(), { failed: 2 });
  } finally {
    await Promise.all([a, b].map((c) => c.end().catch(() => undefined)));
  }
});
