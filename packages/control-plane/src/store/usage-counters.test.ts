import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import type { SessionStatus } from '@space/protocol';
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

/**
 * A PostgreSQL store whose sessions (id: status) all end in one character, so they share one shard
 * and each status's counter is one row, in statuses that do not count on a node (only
 * `status_counts` is locked); with `clients` connections of their own, ended after `work`.
 */
async function oneShard(
  name: string,
  statuses: Record<string, SessionStatus>,
  clients: number,
  work: (store: Awaited<ReturnType<typeof engines.postgres.open>>, clients: pg.Client[]) => Promise<void>,
): Promise<void> {
  const store = await engines.postgres.open(name);
  const url = await engines.postgres.location(name);
  await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
  const inactive = { sandboxId: null, nodeId: null, sandboxStartedAt: null };
  for (const [id, status] of Object.entries(statuses)) await store.insertSession({ ...session(id, 'tn_a'), ...inactive, status });
  const connections = Array.from({ length: clients }, () => new pg.Client(url));
  // A failed run's clients may see the server stop before they end: the test's own error is the one told.
  for (const client of connections) client.on('error', () => undefined);
  try {
    await Promise.all(connections.map((c) => c.connect()));
    await work(store, connections);
  } finally {
    await Promise.all(connections.map((c) => c.end().catch(() => undefined)));
  }
}

test('postgres: status changes in opposite directions on one shard take the counter rows in one order and never deadlock', async () => {
  await oneShard('counter-order', { ses_y0: 'idle', ses_x0: 'stopped', ses_z0: 'failed' }, 3, async (store, [a, b, observer]) => {
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
  });
});

test('postgres: a status change holds its counter rows only while it commits: a transaction left open does not hold up another change of the same statuses', async () => {
  // The two changes share the counter rows of `idle` and `failed`.
  await oneShard('counter-deferred', { ses_y0: 'idle', ses_x0: 'idle' }, 2, async (store, [a, b]) => {
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
  });
});
