import type { NodeUsageBatch, UsageGroupBy } from '@space/protocol';
import { chunksOf } from '@space/server-kit';
import type { Dialect } from './migrations.js';
import { objectBytesTriggers } from './usage-counters.js';
import type { SqlDatabase, SqlExecutor, SqlValue } from './sql-database.js';

// Usage metering in the store: `usage_hourly` (what each session used in each UTC hour; a tenant's
// checkpoint and object storage under session ''), `usage_totals` (per tenant, for /metrics), `usage_batches`
// (the node batches applied, so a resent one is not counted twice) and `usage_clock` (how far the
// checkpoint storage was integrated). The statements of `usageSchema` and `objectStoreUsageSchema`
// are part of released migrations: never change them, add a migration.

/** The measured amounts and their columns, in the units that keep years of totals within 64 bits. */
export const usageColumns = {
  cpuMicros: 'cpu_us',
  memoryKibSeconds: 'memory_kib_s',
  diskKibSeconds: 'disk_kib_s',
  checkpointKibSeconds: 'checkpoint_kib_s',
  objectStoreKibSeconds: 'object_store_kib_s',
  egressBytesOut: 'egress_bytes_out',
  egressBytesIn: 'egress_bytes_in',
  egressRequests: 'egress_requests',
  sandboxMs: 'sandbox_ms',
  checkpoints: 'checkpoints',
} as const;
export type UsageAmounts = Record<keyof typeof usageColumns, number>;
const amountKeys = Object.keys(usageColumns) as (keyof UsageAmounts)[];
const columns = Object.values(usageColumns);

export const noUsage = (): UsageAmounts => Object.fromEntries(amountKeys.map((k) => [k, 0])) as UsageAmounts;

/** A row of a usage report: its group (`key`: a session id, a day, or the tenant) and the sums. */
export interface UsageGroupRow {
  tenantId: string;
  key: string;
  amounts: UsageAmounts;
}

/** Applied node batches kept per ledger: a node resends only the few it has not seen acknowledged. */
const keptBatches = 1000;
/** Rows per multi-row statement (well under SQLite's 32,766 parameters). */
const rowsPerStatement = 100;

/** Migration 28: the tables, with the amounts metered then (the object store's came with 29). */
export function usageSchema(dialect: Dialect): string[] {
  const t = dialect === 'postgres' ? 'TEXT COLLATE "C"' : 'TEXT';
  const firstColumns = columns.filter((c) => c !== usageColumns.objectStoreKibSeconds);
  const counts = firstColumns.map((c) => `${c} BIGINT NOT NULL DEFAULT 0`).join(', ');
  const hour = 'substr(NEW.created_at, 1, 13)';
  const countCheckpoint = [
    `INSERT INTO usage_hourly (session_id, hour, tenant_id, checkpoints) VALUES (NEW.session_id, ${hour}, NEW.tenant_id, 1)
      ON CONFLICT (session_id, hour, tenant_id) DO UPDATE SET checkpoints = usage_hourly.checkpoints + 1`,
    `INSERT INTO usage_totals (tenant_id, checkpoints) VALUES (NEW.tenant_id, 1)
      ON CONFLICT (tenant_id) DO UPDATE SET checkpoints = usage_totals.checkpoints + 1`,
  ];
  return [
    `CREATE TABLE IF NOT EXISTS usage_hourly (session_id ${t} NOT NULL, hour ${t} NOT NULL, tenant_id ${t} NOT NULL, ${counts},
      PRIMARY KEY (session_id, hour, tenant_id))`,
    'CREATE INDEX IF NOT EXISTS usage_hourly_by_tenant ON usage_hourly (tenant_id, hour)',
    'CREATE INDEX IF NOT EXISTS usage_hourly_by_hour ON usage_hourly (hour)',
    `CREATE TABLE IF NOT EXISTS usage_totals (tenant_id ${t} PRIMARY KEY, ${counts})`,
    `CREATE TABLE IF NOT EXISTS usage_batches (ledger ${t} NOT NULL, seq BIGINT NOT NULL, node_id ${t} NOT NULL, applied_at ${t} NOT NULL,
      PRIMARY KEY (ledger, seq))`,
    `CREATE TABLE IF NOT EXISTS usage_clock (id INTEGER PRIMARY KEY, integrated_through ${t} NOT NULL)`,
    `INSERT INTO usage_clock (id, integrated_through) VALUES (1, '${new Date().toISOString()}') ON CONFLICT (id) DO NOTHING`,
    ...(dialect === 'sqlite'
      ? [`CREATE TRIGGER IF NOT EXISTS checkpoints_metered AFTER INSERT ON checkpoints BEGIN ${countCheckpoint.join('; ')}; END`]
      : [
          `CREATE OR REPLACE FUNCTION checkpoints_metered() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
            ${countCheckpoint.join('; ')}; RETURN NULL; END $$`,
          'CREATE OR REPLACE TRIGGER checkpoints_metered AFTER INSERT ON checkpoints FOR EACH ROW EXECUTE FUNCTION checkpoints_metered()',
        ]),
  ];
}

/**
 * Migration 29: the object store's storage: each shipped checkpoint's bytes there (`shipped_bytes`,
 * filled in for those shipped before), each tenant's sum kept by triggers, and its metered amount.
 */
export function objectStoreUsageSchema(dialect: Dialect): string[] {
  const shippedBytes =
    dialect === 'sqlite'
      ? "(SELECT SUM(json_extract(value, '$.bytes')) FROM json_each(shipped_objects))"
      : "(SELECT SUM((o->>'bytes')::bigint) FROM jsonb_array_elements(shipped_objects::jsonb) o)";
  return [
    'ALTER TABLE checkpoints ADD COLUMN shipped_bytes BIGINT',
    'ALTER TABLE tenant_usage ADD COLUMN object_bytes BIGINT NOT NULL DEFAULT 0',
    ...objectBytesTriggers(dialect),
    `UPDATE checkpoints SET shipped_bytes = ${shippedBytes} WHERE shipped_objects IS NOT NULL`,
    `ALTER TABLE usage_hourly ADD COLUMN ${usageColumns.objectStoreKibSeconds} BIGINT NOT NULL DEFAULT 0`,
    `ALTER TABLE usage_totals ADD COLUMN ${usageColumns.objectStoreKibSeconds} BIGINT NOT NULL DEFAULT 0`,
  ];
}

/** The UTC hour of a time, as `usage_hourly` keys it: `YYYY-MM-DDTHH`. */
export const hourOf = (ms: number): string => new Date(ms).toISOString().slice(0, 13);

/** How a period divides among the UTC hours it touches, by time. */
export function hourShares(startMs: number, endMs: number): [string, number][] {
  if (endMs <= startMs) return [[hourOf(endMs), 1]];
  const shares: [string, number][] = [];
  for (let at = startMs; at < endMs; ) {
    const next = Math.min(endMs, (Math.floor(at / 3_600_000) + 1) * 3_600_000);
    shares.push([hourOf(at), (next - at) / (endMs - startMs)]);
    at = next;
  }
  return shares;
}

const scaled = (amounts: Partial<UsageAmounts>, share: number): UsageAmounts =>
  Object.fromEntries(amountKeys.map((k) => [k, Math.round((amounts[k] ?? 0) * share)])) as UsageAmounts;

/** Adds each row's amounts to `usage_hourly` and the tenants' sums to `usage_totals`, a hundred rows a statement. */
async function addUsage(tx: SqlExecutor, given: { sessionId: string; hour: string; tenantId: string; amounts: UsageAmounts }[]): Promise<void> {
  const add = (table: string) => columns.map((c) => `${c} = ${table}.${c} + excluded.${c}`).join(', ');
  // One row per key: a statement may not update a row twice (two batches of a session in one hour).
  const merged = new Map<string, (typeof given)[number]>();
  for (const row of given) {
    const key = JSON.stringify([row.sessionId, row.hour, row.tenantId]);
    const known = merged.get(key);
    if (known) for (const k of amountKeys) known.amounts[k] += row.amounts[k];
    else merged.set(key, { ...row, amounts: { ...row.amounts } });
  }
  const rows = [...merged.values()];
  const totals = new Map<string, UsageAmounts>();
  for (const row of rows) {
    const sum = totals.get(row.tenantId) ?? noUsage();
    for (const k of amountKeys) sum[k] += row.amounts[k];
    totals.set(row.tenantId, sum);
  }
  const values = (width: number) => `(${Array(width).fill('?').join(', ')})`;
  for (const chunk of chunksOf(rows, rowsPerStatement)) {
    await tx.run(
      `INSERT INTO usage_hourly (session_id, hour, tenant_id, ${columns.join(', ')}) VALUES ${chunk.map(() => values(3 + columns.length)).join(', ')}
        ON CONFLICT (session_id, hour, tenant_id) DO UPDATE SET ${add('usage_hourly')}`,
      chunk.flatMap((r): SqlValue[] => [r.sessionId, r.hour, r.tenantId, ...amountKeys.map((k) => r.amounts[k])]),
    );
  }
  const tenantRows = [...totals];
  for (const chunk of chunksOf(tenantRows, rowsPerStatement)) {
    await tx.run(
      `INSERT INTO usage_totals (tenant_id, ${columns.join(', ')}) VALUES ${chunk.map(() => values(1 + columns.length)).join(', ')}
        ON CONFLICT (tenant_id) DO UPDATE SET ${add('usage_totals')}`,
      chunk.flatMap(([tenantId, amounts]): SqlValue[] => [tenantId, ...amountKeys.map((k) => amounts[k])]),
    );
  }
}

/** The tenants of sessions whose batch entry did not name one: from the session, else from its earlier usage. */
async function tenantsOf(tx: SqlExecutor, sessionIds: string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (const chunk of chunksOf(sessionIds, rowsPerStatement)) {
    const marks = chunk.map(() => '?').join(', ');
    const rows = [
      ...(await tx.all<{ id: string; tenant_id: string }>(
        `SELECT session_id AS id, MIN(tenant_id) AS tenant_id FROM usage_hourly WHERE session_id IN (${marks}) GROUP BY session_id`,
        chunk,
      )),
      ...(await tx.all<{ id: string; tenant_id: string }>(`SELECT id, tenant_id FROM sessions WHERE id IN (${marks})`, chunk)),
    ];
    for (const row of rows) found.set(row.id, row.tenant_id);
  }
  return found;
}

/** A node's usage batch, as a control plane collected it. */
export interface UsageBatchFrom {
  nodeId: string;
  batch: NodeUsageBatch;
}

/**
 * Stores usage batches, of any nodes, in one transaction: each (ledger, seq) once (the insert into
 * `usage_batches` says which are new: one stored before, or by another control plane at the same
 * time, adds nothing), with the rows the new ones add; an entry whose tenant cannot be found (a
 * stopped session's volume, the session deleted since) is dropped. Returns, for each, whether it
 * was new (of a batch given twice, the first). Batches go in the order of their key, so two control
 * planes storing overlapping ones never wait on each other in a cycle.
 */
export function applyUsageBatches(db: SqlDatabase, items: UsageBatchFrom[]): Promise<boolean[]> {
  const keyOf = (b: NodeUsageBatch) => `${b.ledger}/${b.seq}`;
  const unique = [...new Map(items.map((i) => [keyOf(i.batch), i] as const)).values()].sort((a, b) =>
    a.batch.ledger === b.batch.ledger ? a.batch.seq - b.batch.seq : a.batch.ledger < b.batch.ledger ? -1 : 1,
  );
  return db.transaction(async (tx) => {
    const fresh = new Set<string>();
    const appliedAt = new Date().toISOString();
    for (const chunk of chunksOf(unique, rowsPerStatement)) {
      const inserted = await tx.all<{ ledger: string; seq: number | string }>(
        `INSERT INTO usage_batches (ledger, seq, node_id, applied_at) VALUES ${chunk.map(() => '(?, ?, ?, ?)').join(', ')}
          ON CONFLICT (ledger, seq) DO NOTHING RETURNING ledger, seq`,
        chunk.flatMap(({ nodeId, batch }) => [batch.ledger, batch.seq, nodeId, appliedAt]),
      );
      for (const row of inserted) fresh.add(`${row.ledger}/${Number(row.seq)}`);
    }
    const added = unique.filter((i) => fresh.has(keyOf(i.batch))).map((i) => i.batch);
    // Each ledger keeps its newest batches' keys only: a node resends only the few it has not seen acknowledged.
    const newest = new Map<string, number>();
    for (const b of added) newest.set(b.ledger, Math.max(newest.get(b.ledger) ?? 0, b.seq));
    const ledgers = [...newest];
    for (const chunk of chunksOf(ledgers, rowsPerStatement)) {
      await tx.run(
        `DELETE FROM usage_batches WHERE ${chunk.map(() => '(ledger = ? AND seq <= ?)').join(' OR ')}`,
        chunk.flatMap(([ledger, seq]) => [ledger, seq - keptBatches]),
      );
    }
    const entries = added.flatMap((b) => b.entries);
    const tenants = await tenantsOf(tx, [...new Set(entries.filter((e) => e.tenantId === null).map((e) => e.sessionId))]);
    await addUsage(
      tx,
      added.flatMap((batch) => {
        const shares = hourShares(Date.parse(batch.start), Date.parse(batch.end));
        return batch.entries.flatMap(({ sessionId, tenantId, ...measured }) => {
          const tenant = tenantId ?? tenants.get(sessionId);
          return tenant ? shares.map(([hour, share]) => ({ sessionId, hour, tenantId: tenant, amounts: scaled(measured, share) })) : [];
        });
      }),
    );
    const told = new Set<string>();
    return items.map(({ batch }) => {
      const key = keyOf(batch);
      const isNew = fresh.has(key) && !told.has(key);
      told.add(key);
      return isNew;
    });
  });
}

/**
 * Adds the tenants' checkpoint and object store bytes × the time since the clock's last move, and moves it to `now`:
 * by one control plane only (the move is a compare-and-set in the same transaction), at most every
 * `everyMs`. Nothing is counted twice or skipped, whichever control planes come and go.
 */
export function integrateCheckpointStorage(db: SqlDatabase, now: number, everyMs: number): Promise<boolean> {
  return db.transaction(async (tx) => {
    const clock = await tx.get<{ through: string }>('SELECT integrated_through AS through FROM usage_clock WHERE id = 1');
    if (!clock) return false;
    const from = Date.parse(clock.through);
    if (now - from < everyMs) return false;
    const moved = await tx.run('UPDATE usage_clock SET integrated_through = ? WHERE id = 1 AND integrated_through = ?', [
      new Date(now).toISOString(),
      clock.through,
    ]);
    if (moved === 0) return false;
    const held = await tx.all<{ tenant_id: string; checkpoints: number | string; objects: number | string }>(
      `SELECT tenant_id, SUM(checkpoint_bytes) AS checkpoints, SUM(object_bytes) AS objects FROM tenant_usage
        GROUP BY tenant_id HAVING SUM(checkpoint_bytes) > 0 OR SUM(object_bytes) > 0`,
    );
    const kibSeconds = ((now - from) / 1000) * (1 / 1024);
    const shares = hourShares(from, now);
    await addUsage(
      tx,
      held.flatMap((row) =>
        shares.map(([hour, share]) => ({
          sessionId: '',
          hour,
          tenantId: row.tenant_id,
          amounts: scaled({ checkpointKibSeconds: Number(row.checkpoints) * kibSeconds, objectStoreKibSeconds: Number(row.objects) * kibSeconds }, share),
        })),
      ),
    );
    return true;
  });
}

const sums = columns.map((c) => `SUM(${c}) AS ${c}`).join(', ');
const amountsOf = (row: Record<string, unknown>): UsageAmounts =>
  Object.fromEntries(amountKeys.map((k) => [k, Number(row[usageColumns[k]] ?? 0)])) as UsageAmounts;

/** What was used in the hours `[fromHour, toHour)`, by tenant, session or day, for one tenant (or all) and one session (or all). */
export async function usageGroups(
  db: SqlExecutor,
  query: { tenantId: string | null; sessionId: string | null; fromHour: string; toHour: string; groupBy: UsageGroupBy; limit: number },
): Promise<UsageGroupRow[]> {
  const key = { tenant: 'tenant_id', session: 'session_id', day: 'substr(hour, 1, 10)' }[query.groupBy];
  const where = ['hour >= ?', 'hour < ?'];
  const params: SqlValue[] = [query.fromHour, query.toHour];
  if (query.tenantId !== null) {
    where.push('tenant_id = ?');
    params.push(query.tenantId);
  }
  if (query.sessionId !== null) {
    where.push('session_id = ?');
    params.push(query.sessionId);
  }
  const rows = await db.all<Record<string, unknown> & { tenant_id: string; k: string }>(
    `SELECT tenant_id, ${key} AS k, ${sums} FROM usage_hourly WHERE ${where.join(' AND ')} GROUP BY tenant_id, ${key} ORDER BY tenant_id, ${key} LIMIT ?`,
    [...params, query.limit],
  );
  return rows.map((row) => ({ tenantId: row.tenant_id, key: String(row.k), amounts: amountsOf(row) }));
}

/** Every tenant's usage since metering began. */
export async function usageTotals(db: SqlExecutor): Promise<Map<string, UsageAmounts>> {
  const rows = await db.all<Record<string, unknown> & { tenant_id: string }>(`SELECT tenant_id, ${columns.join(', ')} FROM usage_totals`);
  return new Map(rows.map((row) => [row.tenant_id, amountsOf(row)]));
}
