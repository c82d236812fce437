import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { startLocalPostgres } from './local-postgres.js';
import { PostgresDatabase } from './postgres-database.js';

test('a connection the server ends between two statements of a transaction fails that transaction, not the process; the next one works', async () => {
  const server = await startLocalPostgres();
  const admin = new pg.Client({ connectionString: await server.url('postgres') });
  let db: PostgresDatabase | null = null;
  try {
    db = await PostgresDatabase.open(await server.url('space'));
    await admin.connect();
    const transaction = db.transaction(async (tx) => {
      const backend = await tx.get<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await admin.query('SELECT pg_terminate_backend($1)', [backend?.pid]);
      // Between two statements (as during a restart of the server): the connection's end arrives now.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await tx.get('SELECT 1 AS one');
    });
    await assert.rejects(transaction, /terminat|closed|Connection/i);
    assert.equal((await db.get<{ one: number }>('SELECT 1 AS one'))?.one, 1, 'a new connection serves the next statement');
    assert.equal(await db.transaction(async (tx) => (await tx.get<{ two: number }>('SELECT 2 AS two'))?.two), 2, 'and the next transaction');
  } finally {
    await admin.end().catch(() => undefined);
    await db?.close();
    await server.stop();
  }
});

test("connections() counts each pool; background work runs on its own connections while a call holds the only one of the calls' pool", async () => {
  const server = await startLocalPostgres();
  let db: PostgresDatabase | null = null;
  try {
    db = await PostgresDatabase.open(await server.url('space'), { maxConnections: 1, backgroundConnections: 1 });
    const database = db;
    let release!: () => void;
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const transaction = database.transaction(async (tx) => {
      await tx.get('SELECT 1 AS one');
      holding();
      await new Promise<void>((resolve) => (release = resolve));
    });
    await held;
    const behind = database.get<{ two: number }>('SELECT 2 AS two');
    // Maintenance's statements and transactions, and whatever they start, take the background pool: served now.
    const backend = (sql: string) => database.get<{ pid: number }>(sql).then((row) => row?.pid);
    const [statement, inTransaction, started] = await database.background(async () => [
      await backend('SELECT pg_backend_pid() AS pid'),
      await database.transaction(async (tx) => (await tx.get<{ pid: number }>('SELECT pg_backend_pid() AS pid'))?.pid),
      await new Promise<number | undefined>((resolve) => setTimeout(() => void backend('SELECT pg_backend_pid() AS pid').then(resolve), 10)),
    ]);
    assert.equal(statement, inTransaction, 'one background connection served them all');
    assert.equal(statement, started);
    assert.deepEqual(database.connections(), { calls: { busy: 1, idle: 0, waiting: 1 }, background: { busy: 0, idle: 1, waiting: 0 } });
    release();
    await transaction;
    assert.equal((await behind)?.two, 2, 'served once the connection came back');
    assert.notEqual(await backend('SELECT pg_backend_pid() AS pid'), statement, 'calls stay on their own pool');
    assert.deepEqual(database.connections(), { calls: { busy: 0, idle: 1, waiting: 0 }, background: { busy: 0, idle: 1, waiting: 0 } });
  } finally {
    await db?.close();
    await server.stop();
  }
});
