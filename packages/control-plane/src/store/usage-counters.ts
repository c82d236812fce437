import type { Dialect } from './migrations.js';

// Counters the database keeps itself, with triggers, so that no code path can miss one: what a
// tenant holds (its limits), what each node runs (placement) and the sessions in each status
// (`/metrics`), a sum of a few rows instead of a COUNT or SUM over all the rows (47–292 ms each at
// 100,000 sessions). The statements are part of released migrations: never change them, add a
// migration.

/**
 * Rows per counter, chosen by the last character of the counted row's (random) id: with one row,
 * every create of a tenant (or on a node) held that row's lock until its commit, and they waited for
 * each other (a session delete 46 ms mean in the 100k scale run).
 */
const shards = 16;

/** A counter table: per key and shard, `columns` (BIGINT, from 0). */
export function counterTable(table: string, key: { column: string; type: string }, columns: string[]): string {
  const counts = columns.map((c) => `${c} BIGINT NOT NULL DEFAULT 0`).join(', ');
  return `CREATE TABLE IF NOT EXISTS ${table} (${key.column} ${key.type} NOT NULL, shard INTEGER NOT NULL, ${counts}, PRIMARY KEY (${key.column}, shard))`;
}

/** The statuses placement counts as a node's load: a sandbox runs or is starting. */
export const activeStatuses = "('running', 'starting')";

const shardOf = (dialect: Dialect, row: 'NEW' | 'OLD') =>
  dialect === 'sqlite' ? `unicode(substr(${row}.id, -1)) % ${shards}` : `ascii(right(${row}.id, 1)) % ${shards}`;

interface Counter {
  table: string;
  /** The counter's key column, and its value: an expression of the trigger's row. */
  key: { column: string; value: string };
  column: string;
}

/** `amount` added to the counter (`onlyIf` the condition holds). */
function add(dialect: Dialect, { table, key, column }: Counter, amount: string, row: 'NEW' | 'OLD', onlyIf?: string): string {
  const values = `${key.value}, ${shardOf(dialect, row)}, ${amount}`;
  return `INSERT INTO ${table} (${key.column}, shard, ${column}) ${onlyIf ? `SELECT ${values} WHERE ${onlyIf}` : `VALUES (${values})`}
    ON CONFLICT (${key.column}, shard) DO UPDATE SET ${column} = ${table}.${column} + excluded.${column}`;
}

/** A session row counts on its volume's node while a sandbox runs or starts for it. */
const activeOnNode = (row: 'NEW' | 'OLD') => `${row}.status IN ${activeStatuses} AND ${row}.volume_node_id IS NOT NULL`;
const nodeUsageCounter = (row: 'NEW' | 'OLD'): Counter => ({
  table: 'node_usage',
  key: { column: 'node_id', value: `${row}.volume_node_id` },
  column: 'active',
});
const statusCounter = (row: 'NEW' | 'OLD'): Counter => ({ table: 'status_counts', key: { column: 'status', value: `${row}.status` }, column: 'sessions' });
/** The update that moves a row from one status's count to another's. */
const statusChanged = 'OLD.status IS DISTINCT FROM NEW.status';

/** `tenant_usage`: +1/−1 session per row inserted/deleted, ± a checkpoint's `size_bytes` (set once, at insert). */
export function tenantUsageTriggers(dialect: Dialect): string[] {
  const tenant = (row: 'NEW' | 'OLD') => ({ column: 'tenant_id', value: `${row}.tenant_id` });
  const changes = [
    { table: 'sessions', column: 'sessions', added: '1', removed: '-1' },
    { table: 'checkpoints', column: 'checkpoint_bytes', added: 'COALESCE(NEW.size_bytes, 0)', removed: '-COALESCE(OLD.size_bytes, 0)' },
  ];
  const count = (column: string, amount: string, row: 'NEW' | 'OLD') => add(dialect, { table: 'tenant_usage', key: tenant(row), column }, amount, row);
  if (dialect === 'sqlite') {
    return changes.flatMap(({ table, column, added, removed }) => [
      `CREATE TRIGGER IF NOT EXISTS ${table}_usage_insert AFTER INSERT ON ${table} BEGIN ${count(column, added, 'NEW')}; END`,
      `CREATE TRIGGER IF NOT EXISTS ${table}_usage_delete AFTER DELETE ON ${table} BEGIN ${count(column, removed, 'OLD')}; END`,
    ]);
  }
  return changes.flatMap(({ table, column, added, removed }) => [
    `CREATE OR REPLACE FUNCTION ${table}_usage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      IF TG_OP = 'INSERT' THEN ${count(column, added, 'NEW')}; RETURN NEW;
      ELSE ${count(column, removed, 'OLD')}; RETURN OLD; END IF; END $$`,
    `CREATE OR REPLACE TRIGGER ${table}_usage AFTER INSERT OR DELETE ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_usage()`,
  ]);
}

/**
 * `tenant_usage.object_bytes`: the bytes of the tenant's checkpoints in the object store (their
 * `shipped_bytes`, set once when shipped): + when set, − when the checkpoint goes.
 */
export function objectBytesTriggers(dialect: Dialect): string[] {
  const count = (amount: string, row: 'NEW' | 'OLD') =>
    add(dialect, { table: 'tenant_usage', key: { column: 'tenant_id', value: `${row}.tenant_id` }, column: 'object_bytes' }, amount, row);
  const shipped = 'COALESCE(NEW.shipped_bytes, 0) - COALESCE(OLD.shipped_bytes, 0)';
  if (dialect === 'sqlite') {
    return [
      `CREATE TRIGGER IF NOT EXISTS checkpoints_object_bytes_update AFTER UPDATE OF shipped_bytes ON checkpoints
        WHEN NEW.shipped_bytes IS NOT OLD.shipped_bytes BEGIN ${count(shipped, 'NEW')}; END`,
      `CREATE TRIGGER IF NOT EXISTS checkpoints_object_bytes_delete AFTER DELETE ON checkpoints WHEN OLD.shipped_bytes IS NOT NULL
        BEGIN ${count('-OLD.shipped_bytes', 'OLD')}; END`,
    ];
  }
  return [
    `CREATE OR REPLACE FUNCTION checkpoints_object_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      IF TG_OP = 'UPDATE' THEN ${count(shipped, 'NEW')}; RETURN NEW;
      ELSE ${count('-COALESCE(OLD.shipped_bytes, 0)', 'OLD')}; RETURN OLD; END IF; END $$`,
    `CREATE OR REPLACE TRIGGER checkpoints_object_bytes AFTER UPDATE OF shipped_bytes OR DELETE ON checkpoints FOR EACH ROW
      EXECUTE FUNCTION checkpoints_object_bytes()`,
  ];
}

/**
 * `node_usage`: the sessions starting or running whose volume is on each node. A row counts while it
 * is active with a node: −1 where it stops counting (deleted, or its status or node changed), +1
 * where it starts.
 */
export function nodeUsageTriggers(dialect: Dialect): string[] {
  const count = (amount: string, row: 'NEW' | 'OLD', onlyIf?: string) => add(dialect, nodeUsageCounter(row), amount, row, onlyIf);
  if (dialect === 'sqlite') {
    // IS NOT: SQLite's null-safe "differs".
    const changed = `(${activeOnNode('OLD')}) IS NOT (${activeOnNode('NEW')}) OR OLD.volume_node_id IS NOT NEW.volume_node_id`;
    return [
      `CREATE TRIGGER IF NOT EXISTS sessions_node_usage_insert AFTER INSERT ON sessions WHEN ${activeOnNode('NEW')} BEGIN ${count('1', 'NEW')}; END`,
      `CREATE TRIGGER IF NOT EXISTS sessions_node_usage_delete AFTER DELETE ON sessions WHEN ${activeOnNode('OLD')} BEGIN ${count('-1', 'OLD')}; END`,
      `CREATE TRIGGER IF NOT EXISTS sessions_node_usage_update AFTER UPDATE OF status, volume_node_id ON sessions WHEN ${changed}
        BEGIN ${count('-1', 'OLD', activeOnNode('OLD'))}; ${count('1', 'NEW', activeOnNode('NEW'))}; END`,
    ];
  }
  const changed = `(${activeOnNode('OLD')}) IS DISTINCT FROM (${activeOnNode('NEW')}) OR OLD.volume_node_id IS DISTINCT FROM NEW.volume_node_id`;
  return [
    // Nested IFs: PL/pgSQL does not promise to stop at the first false of an AND (OLD is null in an insert).
    `CREATE OR REPLACE FUNCTION sessions_node_usage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      IF TG_OP <> 'INSERT' THEN IF ${activeOnNode('OLD')} THEN ${count('-1', 'OLD')}; END IF; END IF;
      IF TG_OP <> 'DELETE' THEN IF ${activeOnNode('NEW')} THEN ${count('1', 'NEW')}; END IF; END IF;
      RETURN NULL; END $$`,
    `CREATE OR REPLACE TRIGGER sessions_node_usage AFTER INSERT OR DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION sessions_node_usage()`,
    `CREATE OR REPLACE TRIGGER sessions_node_usage_update AFTER UPDATE OF status, volume_node_id ON sessions FOR EACH ROW
      WHEN (${changed}) EXECUTE FUNCTION sessions_node_usage()`,
  ];
}

/** `status_counts`: the sessions in each status, for `/metrics`: −1 for the status a row leaves (deleted, or changed), +1 for the one it takes. */
export function statusCountTriggers(dialect: Dialect): string[] {
  const count = (amount: string, row: 'NEW' | 'OLD') => add(dialect, statusCounter(row), amount, row);
  if (dialect === 'sqlite') {
    return [
      `CREATE TRIGGER IF NOT EXISTS sessions_status_insert AFTER INSERT ON sessions BEGIN ${count('1', 'NEW')}; END`,
      `CREATE TRIGGER IF NOT EXISTS sessions_status_delete AFTER DELETE ON sessions BEGIN ${count('-1', 'OLD')}; END`,
      `CREATE TRIGGER IF NOT EXISTS sessions_status_update AFTER UPDATE OF status ON sessions WHEN OLD.status IS NOT NEW.status
        BEGIN ${count('-1', 'OLD')}; ${count('1', 'NEW')}; END`,
    ];
  }
  return [
    `CREATE OR REPLACE FUNCTION sessions_status_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      IF TG_OP <> 'INSERT' THEN ${count('-1', 'OLD')}; END IF;
      IF TG_OP <> 'DELETE' THEN ${count('1', 'NEW')}; END IF;
      RETURN NULL; END $$`,
    `CREATE OR REPLACE TRIGGER sessions_status_count AFTER INSERT OR DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION sessions_status_count()`,
    `CREATE OR REPLACE TRIGGER sessions_status_count_update AFTER UPDATE OF status ON sessions FOR EACH ROW
      WHEN (${statusChanged}) EXECUTE FUNCTION sessions_status_count()`,
  ];
}

/**
 * PL/pgSQL for a trigger on `sessions`: `minus` (OLD's −1) where a row is deleted, `plus` (NEW's +1)
 * where it is inserted, both where it changes, the two counter rows locked in the order of their
 * `key`. Each is locked until its transaction ends; taken OLD first, two changes in opposite
 * directions on one shard (running to paused beside paused to running) each held the row the
 * other waited for: PostgreSQL found the deadlock after its `deadlock_timeout` (1 s) and failed one.
 */
function inKeyOrder(key: string, minus: string, plus: string): string {
  return `IF TG_OP = 'INSERT' THEN ${plus}
      ELSIF TG_OP = 'DELETE' THEN ${minus}
      ELSIF NEW.${key} COLLATE "C" < OLD.${key} COLLATE "C" THEN ${plus} ${minus}
      ELSE ${minus} ${plus} END IF;`;
}

/**
 * The PostgreSQL functions of `node_usage` and `status_counts` again, their two counter rows locked
 * in one order (`inKeyOrder`). SQLite has no row locks (a writer holds the whole database): nothing.
 */
export function orderedCounterFunctions(dialect: Dialect): string[] {
  if (dialect === 'sqlite') return [];
  const nodeCount = (amount: string, row: 'NEW' | 'OLD') => `IF ${activeOnNode(row)} THEN ${add(dialect, nodeUsageCounter(row), amount, row)}; END IF;`;
  const statusCount = (amount: string, row: 'NEW' | 'OLD') => `${add(dialect, statusCounter(row), amount, row)};`;
  return [
    `CREATE OR REPLACE FUNCTION sessions_node_usage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      ${inKeyOrder('volume_node_id', nodeCount('-1', 'OLD'), nodeCount('1', 'NEW'))}
      RETURN NULL; END $$`,
    `CREATE OR REPLACE FUNCTION sessions_status_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      ${inKeyOrder('status', statusCount('-1', 'OLD'), statusCount('1', 'NEW'))}
      RETURN NULL; END $$`,
  ];
}

/**
 * `status_counts`' PostgreSQL triggers again, as constraint triggers deferred to the commit. Fired
 * with its statement, a change locked its two counter rows (16 per status, shared by every change
 * of that status) until its transaction ended, and a start's transaction still sends its history
 * row and its commit from the control plane: at 100,000 sessions the counter's upsert averaged
 * 1.77 ms and the start's status update 3.31 ms, mostly waiting for those rows. Deferred, a change
 * holds them only while it commits. Nothing reads `status_counts` inside a transaction that changed
 * a status (only `/metrics`, on its own), so no reader misses its own change. One statement: the
 * counter is never without a trigger, whatever else runs meanwhile. SQLite: nothing (one writer).
 */
export function deferredStatusCountTriggers(dialect: Dialect): string[] {
  if (dialect === 'sqlite') return [];
  return [
    `DO $$ BEGIN
      DROP TRIGGER IF EXISTS sessions_status_count ON sessions;
      DROP TRIGGER IF EXISTS sessions_status_count_update ON sessions;
      CREATE CONSTRAINT TRIGGER sessions_status_count AFTER INSERT OR DELETE ON sessions DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION sessions_status_count();
      CREATE CONSTRAINT TRIGGER sessions_status_count_update AFTER UPDATE OF status ON sessions DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (${statusChanged}) EXECUTE FUNCTION sessions_status_count();
    END $$`,
  ];
}
