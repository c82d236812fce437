// Every query of the store, written once for both engines (SQLite, PostgreSQL): the transactions that span tables are why it is one class, over ~300 lines.
import { createHash } from 'node:crypto';
import { EgressAuditEntrySchema, type EgressAuditEntry, type StoredObject } from '@space/protocol';
import { chunksOf } from '@space/server-kit';
import {
  type UsageAmounts,
  type UsageBatchFrom,
  type UsageGroupRow,
  applyUsageBatches,
  integrateCheckpointStorage,
  usageGroups,
  usageTotals,
} from './usage-records.js';
import {
  toCheckpoint,
  toHistory,
  toKey,
  toSecret,
  toSession,
  toTemplate,
  type CheckpointDbRow,
  type HistoryDbRow,
  type NodeDbRow,
  toNode,
  type ShipBaseDbRow,
  toShipBase,
  type KeyDbRow,
  type SecretDbRow,
  type SessionDbRow,
  type TemplateDbRow,
  toBuild,
  secretsToDb,
  type TemplateBuildDbRow,
  toVolume,
  toVolumeMount,
  toVolumeSnapshot,
  type VolumeDbRow,
  type VolumeMountDbRow,
  type VolumeSnapshotDbRow,
} from './db-rows.js';
import type { PoolUse, SqlDatabase, SqlExecutor, SqlStatement, SqlValue } from './sql-database.js';
import { historyStart, leaseInsert, leaseRelease, updateStatement } from './sql-statements.js';
import { activeStatuses } from './usage-counters.js';
import type {
  ApiKeyRow,
  CheckpointRow,
  IdempotencyKeyRow,
  DataKeyRow,
  JoinTokenUse,
  NodeCredentialRow,
  NodeJoinTokenRow,
  IdempotentOutcome,
  SandboxHistoryRow,
  SecretRow,
  NodeLoad,
  NewCheckpointRow,
  HeartbeatRow,
  MaintenanceSchedule,
  NodeRow,
  LeftVolumeRow,
  SessionLeaseRow,
  SessionPatch,
  SessionRow,
  SessionSecret,
  SandboxClaim,
  ShipBaseRow,
  Store,
  TemplateRow,
  TemplateBuildPatch,
  TemplateBuildRow,
  BuildCacheRow,
  TenantRow,
  VolumeMountRow,
  VolumeRow,
  VolumeSnapshotRow,
  UsageGroupQuery,
} from './store.js';
import { archivedAuditEntries } from './store.js';

const sessionColumns: Record<keyof SessionPatch | 'maintainAfter', string> = {
  maintainAfter: 'maintain_after',
  status: 'status',
  sandboxId: 'sandbox_id',
  nodeId: 'node_id',
  sandboxStartedAt: 'sandbox_started_at',
  resumeNote: 'resume_note',
  lastActiveAt: 'last_active_at',
  volumeNodeId: 'volume_node_id',
  expiresAt: 'expires_at',
  onTimeout: 'on_timeout',
  services: 'services',
  volumes: 'volumes',
  publicPorts: 'public_ports',
};

/** The fields a session's next maintenance is worked out from (`scheduleMaintenance`): a patch of any makes it due at once. */
const maintenanceInputs: readonly (keyof SessionPatch)[] = ['status', 'sandboxId', 'nodeId', 'sandboxStartedAt', 'expiresAt'];

function withMaintenanceDue(patch: SessionPatch): SessionPatch & { maintainAfter?: null } {
  return maintenanceInputs.some((key) => key in patch) ? { ...patch, maintainAfter: null } : patch;
}

const buildColumns: Record<keyof TemplateBuildPatch, string> = {
  status: 'status',
  endedAt: 'ended_at',
  error: 'error',
  version: 'version',
  steps: 'steps',
  cachedSteps: 'cached_steps',
  log: 'log',
  sessionId: 'session_id',
  heartbeatAt: 'heartbeat_at',
};

/** Session fields kept as JSON text. */
const jsonColumns = new Set<keyof SessionPatch>(['services', 'volumes', 'publicPorts']);

/** Ids (or rows) per statement of a list: a statement's parameters are limited (PostgreSQL: 65,535; SQLite: 32,766). */
const idsPerStatement = 500;

/** Tokens kept per session; older ones stop working. */
const sessionTokensKept = 32;

/** A second row with the same key (SQLite's and PostgreSQL's codes for it). */
function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === '23505';
}

/** The store's queries, written once for both engines (see `SqlDatabase`). */
export class SqlStore implements Store {
  constructor(private readonly db: SqlDatabase) {}

  async insertTenant(row: TenantRow): Promise<void> {
    await this.db.run('INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)', [row.id, row.name, row.createdAt]);
  }

  async getTenant(id: string): Promise<TenantRow | null> {
    const row = await this.db.get<{ id: string; name: string; created_at: string }>('SELECT id, name, created_at FROM tenants WHERE id = ?', [id]);
    return row ? { id: row.id, name: row.name, createdAt: row.created_at } : null;
  }

  async insertApiKey(row: ApiKeyRow): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.run('INSERT INTO api_keys (id, tenant_id, hash, admin, created_at, session_id, scope, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)', [
        row.id,
        row.tenantId,
        row.hash,
        row.admin ? 1 : 0,
        row.createdAt,
        row.sessionId,
        row.scope,
        row.expiresAt,
      ]);
      // A session keeps its newest tokens only: each connect of an E2B client mints one.
      if (row.sessionId)
        await tx.run(
          'DELETE FROM api_keys WHERE session_id = ? AND id NOT IN (SELECT id FROM api_keys WHERE session_id = ? ORDER BY created_at DESC, id DESC LIMIT ?)',
          [row.sessionId, row.sessionId, sessionTokensKept],
        );
    });
  }

  async findApiKey(hash: string): Promise<ApiKeyRow | null> {
    const row = await this.db.get<KeyDbRow>('SELECT * FROM api_keys WHERE hash = ?', [hash]);
    return row ? toKey(row) : null;
  }

  async deleteScopedKeys(sessionId: string, scope: string): Promise<number> {
    return this.db.run('DELETE FROM api_keys WHERE session_id = ? AND scope = ?', [sessionId, scope]);
  }

  async replaceAdminKey(row: ApiKeyRow): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.run('DELETE FROM api_keys WHERE admin = 1 AND hash != ?', [row.hash]);
      await tx.run('INSERT INTO api_keys (id, tenant_id, hash, admin, created_at) VALUES (?, ?, ?, 1, ?) ON CONFLICT (hash) DO NOTHING', [
        row.id,
        row.tenantId,
        row.hash,
        row.createdAt,
      ]);
    });
  }

  async insertSession(row: SessionRow, lease?: SessionLeaseRow): Promise<void> {
    const insert: SqlStatement = {
      sql: 'INSERT INTO sessions (id, tenant_id, template, status, created_at, env, resources, metadata, sandbox_id, node_id, sandbox_started_at, parent_checkpoint_id, checkpoint_interval_sec, idle_timeout_sec, full_checkpoint_interval_sec, on_resume, secrets, egress, volume_node_id, expires_at, on_timeout, services, volumes, public_ports, cwd, code_checkpoint_delay_ms, placement_epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      params: [
        row.id,
        row.tenantId,
        row.template,
        row.status,
        row.createdAt,
        JSON.stringify(row.env),
        JSON.stringify(row.resources),
        JSON.stringify(row.metadata),
        row.sandboxId,
        row.nodeId,
        row.sandboxStartedAt,
        row.parentCheckpointId,
        row.checkpointIntervalSec,
        row.idleTimeoutSec,
        row.fullCheckpointIntervalSec,
        row.onResume,
        secretsToDb(row.secrets),
        JSON.stringify(row.egress),
        row.volumeNodeId,
        row.expiresAt,
        row.onTimeout,
        JSON.stringify(row.services),
        JSON.stringify(row.volumes),
        JSON.stringify(row.publicPorts),
        row.cwd,
        row.codeCheckpointDelayMs,
        row.placementEpoch,
      ],
    };
    if (!lease) {
      await this.db.run(insert.sql, insert.params);
      return;
    }
    const leased = leaseInsert(lease);
    // Together, so no other process sees the row unleased: one statement on PostgreSQL, one commit on SQLite.
    if (this.db.changesInWith) {
      await this.db.run(`WITH leased AS (${leased.sql}) ${insert.sql}`, [...leased.params, ...insert.params]);
      return;
    }
    await this.db.transaction(async (tx) => {
      await tx.run(leased.sql, leased.params);
      await tx.run(insert.sql, insert.params);
    });
  }

  async getSession(tenantId: string, id: string): Promise<SessionRow | null> {
    const row = await this.db.get<SessionDbRow>('SELECT * FROM sessions WHERE id = ? AND tenant_id = ?', [id, tenantId]);
    return row ? toSession(row) : null;
  }

  async getSessionWithLease(tenantId: string, id: string): Promise<{ row: SessionRow; lease: SessionLeaseRow | null } | null> {
    const row = await this.db.get<SessionDbRow & { lease_holder: string | null; lease_operation: string | null; lease_expires_at: number | null }>(
      `SELECT s.*, l.holder AS lease_holder, l.operation AS lease_operation, l.expires_at AS lease_expires_at
       FROM sessions s LEFT JOIN session_leases l ON l.session_id = s.id WHERE s.id = ? AND s.tenant_id = ?`,
      [id, tenantId],
    );
    if (!row) return null;
    const lease =
      row.lease_holder === null
        ? null
        : { sessionId: id, holder: row.lease_holder, operation: row.lease_operation ?? '', expiresAt: Number(row.lease_expires_at) };
    return { row: toSession(row), lease };
  }

  async findSession(id: string): Promise<SessionRow | null> {
    const row = await this.db.get<SessionDbRow>('SELECT * FROM sessions WHERE id = ?', [id]);
    return row ? toSession(row) : null;
  }

  async listSessions(tenantId: string): Promise<SessionRow[]> {
    return (await this.db.all<SessionDbRow>('SELECT * FROM sessions WHERE tenant_id = ? ORDER BY created_at, id', [tenantId])).map(toSession);
  }

  async listSessionsToMaintain(now: number, nodeIds?: string[]): Promise<SessionRow[]> {
    const due = `(status = 'starting' OR (expires_at IS NOT NULL AND expires_at <= ?) OR (sandbox_id IS NOT NULL AND (maintain_after IS NULL OR maintain_after <= ?)))`;
    const times = [new Date(now).toISOString(), now];
    const rows = await this.onNodes<SessionDbRow>(`SELECT * FROM sessions WHERE ${due}`, times, nodeIds, true);
    return rows.sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? -1 : 1) : a.created_at < b.created_at ? -1 : 1)).map(toSession);
  }

  async listSandboxClaims(nodeIds?: string[]): Promise<SandboxClaim[]> {
    type ClaimRow = {
      id: string;
      sandbox_id: string;
      node_id: string;
      volume_node_id: string | null;
      maintain_after: number | string | null;
      checkpoint_interval_sec: number;
      full_checkpoint_interval_sec: number;
    };
    const rows = await this.onNodes<ClaimRow>(
      'SELECT id, sandbox_id, node_id, volume_node_id, maintain_after, checkpoint_interval_sec, full_checkpoint_interval_sec FROM sessions WHERE sandbox_id IS NOT NULL',
      [],
      nodeIds,
      false,
    );
    return rows.map((r) => ({
      sessionId: r.id,
      sandboxId: r.sandbox_id,
      nodeId: r.node_id,
      volumeNodeId: r.volume_node_id,
      // PostgreSQL returns a BIGINT as text.
      maintainAfter: r.maintain_after === null ? null : Number(r.maintain_after),
      checkpointIntervalSec: r.checkpoint_interval_sec,
      fullCheckpointIntervalSec: r.full_checkpoint_interval_sec,
    }));
  }

  /**
   * `select` (a query of sessions with a WHERE clause, and its parameters), all of them or only on
   * `nodeIds` (their sandbox's node, else their volume's), with those on no node when `orNowhere`.
   */
  private async onNodes<R>(select: string, params: SqlValue[], nodeIds: string[] | undefined, orNowhere: boolean): Promise<R[]> {
    if (!nodeIds) return this.db.all<R>(select, params);
    const rows: R[] = orNowhere ? await this.db.all<R>(`${select} AND node_id IS NULL AND volume_node_id IS NULL`, params) : [];
    for (const chunk of chunksOf(nodeIds, idsPerStatement)) {
      const marks = chunk.map(() => '?').join(', ');
      rows.push(
        ...(await this.db.all<R>(`${select} AND (node_id IN (${marks}) OR (node_id IS NULL AND volume_node_id IN (${marks})))`, [
          ...params,
          ...chunk,
          ...chunk,
        ])),
      );
    }
    return rows;
  }

  async scheduleMaintenance(schedules: MaintenanceSchedule[]): Promise<void> {
    // The VALUES list's columns are named by the CTE (SQLite takes no column names after a
    // subquery's alias); the time is cast, as PostgreSQL would take an untyped parameter there for text.
    for (const chunk of chunksOf(schedules, idsPerStatement)) {
      await this.db.run(
        `WITH due (id, at, status, sandbox_id, expires_at) AS (VALUES ${chunk.map(() => '(?, CAST(? AS BIGINT), ?, ?, ?)').join(', ')})
         UPDATE sessions SET maintain_after = due.at FROM due
         WHERE sessions.id = due.id AND sessions.status = due.status AND COALESCE(sessions.sandbox_id, '') = due.sandbox_id AND COALESCE(sessions.expires_at, '') = due.expires_at`,
        chunk.flatMap(({ id, at, basis }) => [id, Math.round(at), basis.status, basis.sandboxId ?? '', basis.expiresAt ?? '']),
      );
    }
  }

  async findSessions(ids: string[]): Promise<SessionRow[]> {
    const found: SessionRow[] = [];
    for (const chunk of chunksOf(ids, idsPerStatement)) {
      const rows = await this.db.all<SessionDbRow>(`SELECT * FROM sessions WHERE id IN (${chunk.map(() => '?').join(', ')})`, chunk);
      found.push(...rows.map(toSession));
    }
    return found;
  }

  async listSessionsOnNode(nodeId: string): Promise<SessionRow[]> {
    const rows = await this.db.all<SessionDbRow>('SELECT * FROM sessions WHERE volume_node_id = ? OR node_id = ? ORDER BY created_at, id', [nodeId, nodeId]);
    return rows.map(toSession);
  }

  async heardControlPlane(id: string, at: number): Promise<void> {
    await this.db.run('INSERT INTO control_planes (id, heard_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET heard_at = excluded.heard_at', [id, at]);
  }

  async liveControlPlanes(since: number): Promise<string[]> {
    return (await this.db.all<{ id: string }>('SELECT id FROM control_planes WHERE heard_at >= ? ORDER BY id', [since])).map((r) => r.id);
  }

  async forgetControlPlane(id: string): Promise<void> {
    await this.db.run('DELETE FROM control_planes WHERE id = ?', [id]);
  }

  async forgetControlPlanesBefore(before: number): Promise<void> {
    await this.db.run('DELETE FROM control_planes WHERE heard_at < ?', [before]);
  }

  async countSessionsByStatus(): Promise<Record<string, number>> {
    // Kept by the database (usage-counters.ts): a row per status and shard, not a read of every session.
    const rows = await this.db.all<{ status: string; n: number }>(
      'SELECT status, SUM(sessions) AS n FROM status_counts GROUP BY status HAVING SUM(sessions) <> 0',
    );
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  }

  async countSessions(tenantId: string): Promise<number> {
    // Number: PostgreSQL's SUM of a BIGINT is NUMERIC, which its driver hands over as a string.
    return Number((await this.db.get<{ n: number }>('SELECT COALESCE(SUM(sessions), 0) AS n FROM tenant_usage WHERE tenant_id = ?', [tenantId]))?.n ?? 0);
  }

  async updateSession(id: string, patch: SessionPatch): Promise<void> {
    await this.updateRow(this.db, 'sessions', sessionColumns, id, withMaintenanceDue(patch), jsonColumns);
  }

  async recordSessionsUsed(uses: ReadonlyMap<string, number>): Promise<void> {
    const entries = [...uses];
    for (const chunk of chunksOf(entries, idsPerStatement)) {
      const times = chunk.flatMap(([id, at]) => [id, new Date(at).toISOString()]);
      await this.db.run(
        `UPDATE sessions SET last_active_at = CASE id ${chunk.map(() => 'WHEN ? THEN ?').join(' ')} END WHERE id IN (${chunk.map(() => '?').join(', ')})`,
        [...times, ...chunk.map(([id]) => id)],
      );
    }
  }

  async advancePlacement(id: string, from: number): Promise<boolean> {
    return (await this.db.run('UPDATE sessions SET placement_epoch = ? WHERE id = ? AND placement_epoch = ?', [from + 1, id, from])) > 0;
  }

  async updatePlacedSession(id: string, epoch: number, patch: SessionPatch): Promise<boolean> {
    const update = this.placedUpdate(id, epoch, patch);
    return update !== null && (await this.db.run(update.sql, update.params)) > 0;
  }

  async recordPlacedStart(epoch: number, patch: SessionPatch, start: SandboxHistoryRow, leaseHolder?: string): Promise<boolean> {
    const update = this.placedUpdate(start.sessionId, epoch, patch);
    if (!update) return false;
    const release = leaseHolder ? leaseRelease(start.sessionId, leaseHolder) : null;
    // On the path of every start: one commit (a disk flush each on both engines), and on PostgreSQL
    // one statement (a round trip instead of four: BEGIN, the update, the history's insert, COMMIT;
    // a create's lease released in it too).
    if (this.db.changesInWith) {
      const started = historyStart(start, 'placed');
      const released = release ? `, released AS (${release.sql} AND EXISTS (SELECT 1 FROM placed))` : '';
      const placed = await this.db.get<{ placed: number | string }>(
        `WITH placed AS (${update.sql} RETURNING id), started AS (${started.sql})${released} SELECT COUNT(*) AS placed FROM placed`,
        [...update.params, ...started.params, ...(release?.params ?? [])],
      );
      return Number(placed?.placed) > 0;
    }
    return this.db.transaction(async (tx) => {
      const placed = (await tx.run(update.sql, update.params)) > 0;
      const started = historyStart(start);
      if (placed) await tx.run(started.sql, started.params);
      if (placed && release) await tx.run(release.sql, release.params);
      return placed;
    });
  }

  /** The update of a placed session's row: only while it is still at placement `epoch`. */
  private placedUpdate(id: string, epoch: number, patch: SessionPatch): SqlStatement | null {
    return updateStatement('sessions', sessionColumns, id, withMaintenanceDue(patch), jsonColumns, { column: 'placement_epoch', value: epoch });
  }

  /** Sets the patch's fields of row `id` of `table` (see `updateStatement`); the rows changed. */
  private async updateRow<P extends object>(
    db: SqlExecutor,
    table: string,
    columns: Record<keyof P, string>,
    id: string,
    patch: P,
    json: ReadonlySet<keyof P> = new Set(),
  ): Promise<number> {
    const update = updateStatement(table, columns, id, patch, json);
    return update ? db.run(update.sql, update.params) : 0;
  }

  async recordLeftVolume(left: LeftVolumeRow): Promise<void> {
    await this.db.run(
      'INSERT INTO left_volumes (session_id, node_id, left_at, named_volume_ids) VALUES (?, ?, ?, ?) ON CONFLICT (session_id, node_id) DO NOTHING',
      [left.sessionId, left.nodeId, left.leftAt, JSON.stringify(left.namedVolumeIds)],
    );
  }

  async moveVolume(volumeId: string, nodeId: string): Promise<void> {
    await this.db.run('UPDATE volumes SET node_id = ? WHERE id = ?', [nodeId, volumeId]);
  }

  async listLeftVolumes(): Promise<LeftVolumeRow[]> {
    const rows = await this.db.all<{ session_id: string; node_id: string; left_at: string; named_volume_ids: string }>(
      'SELECT * FROM left_volumes ORDER BY left_at',
    );
    return rows.map((r) => ({ sessionId: r.session_id, nodeId: r.node_id, leftAt: r.left_at, namedVolumeIds: JSON.parse(r.named_volume_ids) as string[] }));
  }

  async deleteLeftVolume(sessionId: string, nodeId: string): Promise<void> {
    await this.db.run('DELETE FROM left_volumes WHERE session_id = ? AND node_id = ?', [sessionId, nodeId]);
  }

  async deleteSession(id: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.run('DELETE FROM sessions WHERE id = ?', [id]);
      await tx.run('DELETE FROM sandbox_history WHERE session_id = ?', [id]);
      await tx.run('DELETE FROM egress_audit WHERE session_id = ?', [id]);
      await tx.run('DELETE FROM api_keys WHERE session_id = ?', [id]);
      await tx.run('DELETE FROM volume_mounts WHERE session_id = ?', [id]);
      await this.retireShipBases(tx, id);
    });
    // Again once the deletion is visible: a base a shipment inserted meanwhile was not seen by the
    // retirement above, and its own insert's retirement may not have seen the deletion yet.
    await this.retireShipBases(this.db, id);
  }

  async insertCheckpoint(row: NewCheckpointRow): Promise<void> {
    await this.db.run(
      'INSERT INTO checkpoints (id, session_id, tenant_id, kind, trigger, node_id, created_at, size_bytes, pause_ms, volumes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      [row.id, row.sessionId, row.tenantId, row.kind, row.trigger, row.nodeId, row.createdAt, row.sizeBytes, row.pauseMs, JSON.stringify(row.volumes)],
    );
    // Its pause sets how soon the next full checkpoint of a busy session may come: due at once, to be worked out again.
    if (row.kind === 'full') await this.db.run('UPDATE sessions SET maintain_after = NULL WHERE id = ?', [row.sessionId]);
  }

  async getCheckpoint(tenantId: string, id: string): Promise<CheckpointRow | null> {
    const row = await this.db.get<CheckpointDbRow>('SELECT * FROM checkpoints WHERE id = ? AND tenant_id = ?', [id, tenantId]);
    return row ? toCheckpoint(row) : null;
  }

  async knownCheckpoints(ids: string[]): Promise<Set<string>> {
    const known = new Set<string>();
    for (const chunk of chunksOf(ids, idsPerStatement)) {
      const rows = await this.db.all<{ id: string }>(`SELECT id FROM checkpoints WHERE id IN (${chunk.map(() => '?').join(', ')})`, chunk);
      for (const row of rows) known.add(row.id);
    }
    return known;
  }

  async checkpointBytes(tenantId: string): Promise<number> {
    return Number(
      (await this.db.get<{ n: number }>('SELECT COALESCE(SUM(checkpoint_bytes), 0) AS n FROM tenant_usage WHERE tenant_id = ?', [tenantId]))?.n ?? 0,
    );
  }

  async listCheckpoints(sessionId: string): Promise<CheckpointRow[]> {
    return (await this.db.all<CheckpointDbRow>('SELECT * FROM checkpoints WHERE session_id = ? ORDER BY created_at, id', [sessionId])).map(toCheckpoint);
  }

  async listNewestCheckpoints(sessionIds: string[]): Promise<Map<string, CheckpointRow[]>> {
    const newest = new Map<string, CheckpointRow[]>();
    for (const chunk of chunksOf(sessionIds, idsPerStatement)) {
      const rows = await this.db.all<CheckpointDbRow>(
        `SELECT * FROM (
           SELECT c.*, ROW_NUMBER() OVER (PARTITION BY c.session_id, c.kind ORDER BY c.created_at DESC, c.id DESC) AS newest_rank
           FROM checkpoints c WHERE c.session_id IN (${chunk.map(() => '?').join(', ')})
         ) ranked WHERE newest_rank = 1 ORDER BY created_at, id`,
        chunk,
      );
      for (const row of rows.map(toCheckpoint)) newest.set(row.sessionId, [...(newest.get(row.sessionId) ?? []), row]);
    }
    return newest;
  }

  async listTenantCheckpoints(tenantId: string): Promise<CheckpointRow[]> {
    return (await this.db.all<CheckpointDbRow>('SELECT * FROM checkpoints WHERE tenant_id = ? ORDER BY created_at, id', [tenantId])).map(toCheckpoint);
  }

  async deleteCheckpoint(id: string): Promise<void> {
    await this.db.run('DELETE FROM checkpoints WHERE id = ?', [id]);
  }

  async isForkParent(checkpointId: string): Promise<boolean> {
    return (await this.db.get('SELECT 1 FROM sessions WHERE parent_checkpoint_id = ? LIMIT 1', [checkpointId])) !== undefined;
  }

  async listChildren(sessionId: string): Promise<SessionRow[]> {
    const rows = await this.db.all<SessionDbRow>(
      'SELECT s.* FROM sessions s JOIN checkpoints c ON s.parent_checkpoint_id = c.id WHERE c.session_id = ? ORDER BY s.created_at, s.id',
      [sessionId],
    );
    return rows.map(toSession);
  }

  async recordSandboxEnd(sandboxId: string, reason: string): Promise<void> {
    await this.db.run('UPDATE sandbox_history SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL', [
      new Date().toISOString(),
      reason,
      sandboxId,
    ]);
  }

  async correctSandboxEnd(sessionId: string, nodeId: string, end: { endedAt: string; reason: string; note: string }): Promise<void> {
    await this.db.run(
      `UPDATE sandbox_history SET ended_at = ?, end_reason = ?, note = CASE WHEN note IS NULL THEN ? ELSE note || '; ' || ? END
       WHERE id = (SELECT id FROM sandbox_history WHERE session_id = ? AND node_id = ? AND end_reason = 'lost' ORDER BY started_at DESC, id DESC LIMIT 1)`,
      [end.endedAt, end.reason, end.note, end.note, sessionId, nodeId],
    );
  }

  async archiveEgressAudit(sessionId: string, entries: EgressAuditEntry[]): Promise<void> {
    if (entries.length === 0) return;
    await this.db.transaction(async (tx) => {
      for (const entry of entries) {
        const json = JSON.stringify(entry);
        // Keyed by content: the same node's entries kept again (a collection retried) are kept once.
        const key = createHash('sha256').update(json).digest('hex');
        await tx.run('INSERT INTO egress_audit (session_id, entry_key, time, entry) VALUES (?, ?, ?, ?) ON CONFLICT (session_id, entry_key) DO NOTHING', [
          sessionId,
          key,
          entry.time,
          json,
        ]);
      }
      await tx.run(
        'DELETE FROM egress_audit WHERE session_id = ? AND time < (SELECT time FROM egress_audit WHERE session_id = ? ORDER BY time DESC LIMIT 1 OFFSET ?)',
        [sessionId, sessionId, archivedAuditEntries - 1],
      );
    });
  }

  async listArchivedEgressAudit(sessionId: string, limit: number): Promise<EgressAuditEntry[]> {
    const rows = await this.db.all<{ entry: string }>('SELECT entry FROM egress_audit WHERE session_id = ? ORDER BY time DESC, entry_key LIMIT ?', [
      sessionId,
      limit,
    ]);
    return rows.reverse().flatMap((r) => {
      const parsed = EgressAuditEntrySchema.safeParse(JSON.parse(r.entry));
      return parsed.success ? [parsed.data] : [];
    });
  }

  async listSandboxHistory(sessionId: string): Promise<SandboxHistoryRow[]> {
    return (await this.db.all<HistoryDbRow>('SELECT * FROM sandbox_history WHERE session_id = ? ORDER BY started_at, id', [sessionId])).map(toHistory);
  }

  async setSessionEgress(id: string, egress: SessionRow['egress']): Promise<void> {
    await this.db.run('UPDATE sessions SET egress = ? WHERE id = ?', [JSON.stringify(egress), id]);
  }

  async setSessionSecrets(id: string, from: SessionSecret[], to: SessionSecret[]): Promise<boolean> {
    return (await this.db.run('UPDATE sessions SET secrets = ? WHERE id = ? AND secrets = ?', [secretsToDb(to), id, secretsToDb(from)])) > 0;
  }

  async claimIdempotencyKey(claim: Omit<IdempotencyKeyRow, 'outcome'>, now: number): Promise<IdempotencyKeyRow | null> {
    const claimed = await this.db.run(
      `INSERT INTO idempotency_keys (tenant_id, idem_key, operation, status, body, expires_at) VALUES (?, ?, ?, NULL, NULL, ?)
       ON CONFLICT (tenant_id, idem_key) DO UPDATE SET operation = excluded.operation, status = NULL, body = NULL, expires_at = excluded.expires_at
       WHERE idempotency_keys.expires_at <= ?`,
      [claim.tenantId, claim.key, claim.operation, claim.expiresAt, now],
    );
    if (claimed > 0) return null;
    const row = await this.db.get<{ operation: string; status: number | null; body: string | null; expires_at: number | string }>(
      'SELECT operation, status, body, expires_at FROM idempotency_keys WHERE tenant_id = ? AND idem_key = ?',
      [claim.tenantId, claim.key],
    );
    // Released between the two statements: claimed by nobody now, so the caller tries again.
    if (!row) return this.claimIdempotencyKey(claim, now);
    return {
      tenantId: claim.tenantId,
      key: claim.key,
      operation: row.operation,
      outcome: row.status === null || row.body === null ? null : { status: Number(row.status), body: row.body },
      expiresAt: Number(row.expires_at),
    };
  }

  async renewIdempotencyKey(tenantId: string, key: string, expiresAt: number): Promise<void> {
    await this.db.run('UPDATE idempotency_keys SET expires_at = ? WHERE tenant_id = ? AND idem_key = ? AND status IS NULL', [expiresAt, tenantId, key]);
  }

  async finishIdempotencyKey(tenantId: string, key: string, outcome: IdempotentOutcome, expiresAt: number): Promise<void> {
    await this.db.run('UPDATE idempotency_keys SET status = ?, body = ?, expires_at = ? WHERE tenant_id = ? AND idem_key = ? AND status IS NULL', [
      outcome.status,
      outcome.body,
      expiresAt,
      tenantId,
      key,
    ]);
  }

  async releaseIdempotencyKey(tenantId: string, key: string): Promise<void> {
    await this.db.run('DELETE FROM idempotency_keys WHERE tenant_id = ? AND idem_key = ? AND status IS NULL', [tenantId, key]);
  }

  async deleteExpiredIdempotencyKeys(now: number): Promise<number> {
    return this.db.run('DELETE FROM idempotency_keys WHERE expires_at <= ?', [now]);
  }

  async acquireSessionLease(lease: SessionLeaseRow, now: number): Promise<boolean> {
    const changed = await this.db.run(
      'INSERT INTO session_leases (session_id, holder, operation, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, operation = excluded.operation, expires_at = excluded.expires_at WHERE session_leases.expires_at <= ?',
      [lease.sessionId, lease.holder, lease.operation, lease.expiresAt, now],
    );
    return changed > 0;
  }

  async renewSessionLease(sessionId: string, holder: string, expiresAt: number): Promise<boolean> {
    return (await this.db.run('UPDATE session_leases SET expires_at = ? WHERE session_id = ? AND holder = ?', [expiresAt, sessionId, holder])) > 0;
  }

  async releaseSessionLease(sessionId: string, holder: string): Promise<void> {
    const release = leaseRelease(sessionId, holder);
    await this.db.run(release.sql, release.params);
  }

  async releaseSessionLeasesOf(holderPrefix: string): Promise<number> {
    // substr, not LIKE: a prefix's `_` and `%` are plain characters.
    return this.db.run('DELETE FROM session_leases WHERE substr(holder, 1, ?) = ?', [holderPrefix.length, holderPrefix]);
  }

  async getSessionLease(sessionId: string): Promise<SessionLeaseRow | null> {
    const row = await this.db.get<{ session_id: string; holder: string; operation: string; expires_at: number }>(
      'SELECT * FROM session_leases WHERE session_id = ?',
      [sessionId],
    );
    return row ? { sessionId: row.session_id, holder: row.holder, operation: row.operation, expiresAt: Number(row.expires_at) } : null;
  }

  async putSecret(row: SecretRow): Promise<SecretRow> {
    await this.db.run(
      'INSERT INTO secrets (tenant_id, name, value, hosts, placeholder, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value, hosts = excluded.hosts, updated_at = excluded.updated_at',
      [row.tenantId, row.name, row.value, JSON.stringify(row.hosts), row.placeholder, row.createdAt, row.updatedAt],
    );
    return (await this.getSecret(row.tenantId, row.name))!;
  }

  async getSecret(tenantId: string, name: string): Promise<SecretRow | null> {
    const row = await this.db.get<SecretDbRow>('SELECT * FROM secrets WHERE tenant_id = ? AND name = ?', [tenantId, name]);
    return row ? toSecret(row) : null;
  }

  async listSecrets(tenantId: string): Promise<SecretRow[]> {
    return (await this.db.all<SecretDbRow>('SELECT * FROM secrets WHERE tenant_id = ? ORDER BY name', [tenantId])).map(toSecret);
  }

  async deleteSecret(tenantId: string, name: string): Promise<boolean> {
    return (await this.db.run('DELETE FROM secrets WHERE tenant_id = ? AND name = ?', [tenantId, name])) > 0;
  }

  async insertTemplateVersion(row: Omit<TemplateRow, 'version'>): Promise<TemplateRow> {
    // One statement reads the newest version and writes the next; two control planes doing it at
    // once on PostgreSQL can still compute the same one, and the loser tries again.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.db.run(
          'INSERT INTO templates (id, tenant_id, name, version, from_checkpoint, node_id, created_at, config) SELECT ?, ?, ?, COALESCE(MAX(version), 0) + 1, ?, ?, ?, ? FROM templates WHERE tenant_id = ? AND name = ?',
          [
            row.id,
            row.tenantId,
            row.name,
            row.fromCheckpoint,
            row.nodeId,
            row.createdAt,
            row.config ? JSON.stringify(row.config) : null,
            row.tenantId,
            row.name,
          ],
        );
        break;
      } catch (err) {
        if (attempt >= 5 || !isUniqueViolation(err)) throw err;
      }
    }
    const inserted = await this.db.get<TemplateDbRow>('SELECT * FROM templates WHERE id = ?', [row.id]);
    return toTemplate(inserted!);
  }

  async listTemplates(tenantId: string): Promise<TemplateRow[]> {
    return (await this.db.all<TemplateDbRow>('SELECT * FROM templates WHERE tenant_id = ? ORDER BY name, version', [tenantId])).map(toTemplate);
  }

  async deleteTemplate(id: string): Promise<void> {
    await this.db.run('DELETE FROM templates WHERE id = ?', [id]);
  }

  async insertBuild(row: TemplateBuildRow): Promise<void> {
    await this.db.run(
      'INSERT INTO template_builds (id, tenant_id, name, status, created_at, ended_at, error, version, steps, cached_steps, log, session_id, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      [
        row.id,
        row.tenantId,
        row.name,
        row.status,
        row.createdAt,
        row.endedAt,
        row.error,
        row.version,
        row.steps,
        row.cachedSteps,
        row.log,
        row.sessionId,
        row.heartbeatAt,
      ],
    );
  }

  async updateBuild(id: string, patch: TemplateBuildPatch): Promise<void> {
    await this.updateRow(this.db, 'template_builds', buildColumns, id, patch);
  }

  async getBuild(tenantId: string, id: string): Promise<TemplateBuildRow | null> {
    const row = await this.db.get<TemplateBuildDbRow>('SELECT * FROM template_builds WHERE tenant_id = ? AND id = ?', [tenantId, id]);
    return row ? toBuild(row) : null;
  }

  async listStaleBuilds(before: string): Promise<TemplateBuildRow[]> {
    return (
      await this.db.all<TemplateBuildDbRow>(
        "SELECT * FROM template_builds WHERE status = 'running' AND COALESCE(heartbeat_at, created_at) < ? ORDER BY created_at",
        [before],
      )
    ).map(toBuild);
  }

  async getBuildCache(tenantId: string, key: string): Promise<BuildCacheRow | null> {
    const row = await this.db.get<{ template_id: string; created_at: string }>('SELECT * FROM template_build_cache WHERE tenant_id = ? AND cache_key = ?', [
      tenantId,
      key,
    ]);
    return row ? { tenantId, key, templateId: row.template_id, createdAt: row.created_at } : null;
  }

  async putBuildCache(row: BuildCacheRow): Promise<void> {
    await this.db.run(
      'INSERT INTO template_build_cache (tenant_id, cache_key, template_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, cache_key) DO UPDATE SET template_id = excluded.template_id, created_at = excluded.created_at',
      [row.tenantId, row.key, row.templateId, row.createdAt],
    );
  }

  async listBuildCache(tenantId: string): Promise<BuildCacheRow[]> {
    const rows = await this.db.all<{ cache_key: string; template_id: string; created_at: string }>(
      'SELECT * FROM template_build_cache WHERE tenant_id = ? ORDER BY created_at, cache_key',
      [tenantId],
    );
    return rows.map((r) => ({ tenantId, key: r.cache_key, templateId: r.template_id, createdAt: r.created_at }));
  }

  async deleteBuildCache(tenantId: string, key: string): Promise<void> {
    await this.db.run('DELETE FROM template_build_cache WHERE tenant_id = ? AND cache_key = ?', [tenantId, key]);
  }

  async recordHeartbeats(rows: HeartbeatRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db.run(
      `INSERT INTO nodes (id, url, token, status, capacity, storage, sandboxes, registered_at, last_heartbeat_at) VALUES ${rows.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')} ON CONFLICT (id) DO UPDATE SET url = excluded.url, token = excluded.token, capacity = excluded.capacity, storage = excluded.storage, sandboxes = excluded.sandboxes, last_heartbeat_at = excluded.last_heartbeat_at`,
      rows.flatMap((row) => [
        row.id,
        row.url,
        row.token,
        'ready',
        JSON.stringify(row.capacity),
        row.storage,
        row.sandboxes,
        row.lastHeartbeatAt,
        row.lastHeartbeatAt,
      ]),
    );
  }

  async listNodes(): Promise<NodeRow[]> {
    return (await this.db.all<NodeDbRow>('SELECT * FROM nodes ORDER BY registered_at, id')).map(toNode);
  }

  async getNode(id: string): Promise<NodeRow | null> {
    const row = await this.db.get<NodeDbRow>('SELECT * FROM nodes WHERE id = ?', [id]);
    return row ? toNode(row) : null;
  }

  async setNodeStatus(id: string, status: NodeRow['status']): Promise<void> {
    await this.db.run('UPDATE nodes SET status = ? WHERE id = ?', [status, id]);
  }

  async insertNodeJoinToken(row: NodeJoinTokenRow): Promise<void> {
    await this.db.run('INSERT INTO node_join_tokens (hash, created_at, expires_at, uses) VALUES (?, ?, ?, ?)', [
      row.hash,
      row.createdAt,
      row.expiresAt,
      row.uses,
    ]);
  }

  async useNodeJoinToken(hash: string, nodeId: string, at: string): Promise<JoinTokenUse> {
    return this.db.transaction(async (tx): Promise<JoinTokenUse> => {
      const row = await tx.get<{ expires_at: string; used_by: string | null; used_at: string | null; uses: number; used_count: number }>(
        'SELECT expires_at, used_by, used_at, uses, used_count FROM node_join_tokens WHERE hash = ?',
        [hash],
      );
      if (!row) return { outcome: 'unknown' };
      const spent = (usedBy: string, usedAt: string): JoinTokenUse => ({ outcome: 'used-before', usedBy, usedAt, uses: Number(row.uses) });
      if (Number(row.used_count) >= Number(row.uses)) return spent(row.used_by ?? '', row.used_at ?? '');
      if (row.expires_at <= at) return { outcome: 'expired', expiresAt: row.expires_at };
      // Of nodes presenting its last use at once, the one whose update lands first has it.
      const changed = await tx.run('UPDATE node_join_tokens SET used_by = ?, used_at = ?, used_count = used_count + 1 WHERE hash = ? AND used_count < uses', [
        nodeId,
        at,
        hash,
      ]);
      return changed > 0 ? { outcome: 'used' } : spent('another node', at);
    });
  }

  async putNodeCredential(row: Omit<NodeCredentialRow, 'revokedAt'>): Promise<void> {
    await this.db.run(
      'INSERT INTO node_credentials (node_id, hash, created_at, revoked_at) VALUES (?, ?, ?, NULL) ON CONFLICT (node_id) DO UPDATE SET hash = excluded.hash, created_at = excluded.created_at, revoked_at = NULL',
      [row.nodeId, row.hash, row.createdAt],
    );
  }

  async findNodeCredential(hash: string): Promise<NodeCredentialRow | null> {
    const row = await this.db.get<{ node_id: string; hash: string; created_at: string; revoked_at: string | null }>(
      'SELECT * FROM node_credentials WHERE hash = ?',
      [hash],
    );
    return row ? { nodeId: row.node_id, hash: row.hash, createdAt: row.created_at, revokedAt: row.revoked_at } : null;
  }

  async revokeNodeCredential(nodeId: string, at: string): Promise<boolean> {
    return (await this.db.run('UPDATE node_credentials SET revoked_at = ? WHERE node_id = ? AND revoked_at IS NULL', [at, nodeId])) > 0;
  }

  async insertDataKey(row: DataKeyRow): Promise<boolean> {
    const changed = await this.db.run('INSERT INTO data_keys (id, tenant_id, wrapped, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING', [
      row.id,
      row.tenantId,
      row.wrapped,
      row.createdAt,
    ]);
    return changed > 0;
  }

  async tenantDataKey(tenantId: string): Promise<DataKeyRow | null> {
    const row = await this.db.get<{ id: string; tenant_id: string; wrapped: string; created_at: string }>('SELECT * FROM data_keys WHERE tenant_id = ?', [
      tenantId,
    ]);
    return row ? { id: row.id, tenantId: row.tenant_id, wrapped: row.wrapped, createdAt: row.created_at } : null;
  }

  async markShipped(checkpointId: string, holder: string, shipped: { at: string; baseId: string; objects: StoredObject[] }): Promise<boolean> {
    const changed = await this.db.run(
      `UPDATE checkpoints SET shipped_at = ?, shipped_base_id = ?, shipped_objects = ?, shipped_bytes = ?, ship_claim = NULL, ship_claim_until = NULL
        WHERE id = ? AND ship_claim = ?`,
      [shipped.at, shipped.baseId, JSON.stringify(shipped.objects), shipped.objects.reduce((sum, o) => sum + o.bytes, 0), checkpointId, holder],
    );
    return changed > 0;
  }

  async listUnshipped(): Promise<CheckpointRow[]> {
    return (await this.db.all<CheckpointDbRow>('SELECT * FROM checkpoints WHERE shipped_at IS NULL ORDER BY created_at, id')).map(toCheckpoint);
  }

  async claimShipment(checkpointId: string, holder: string, until: number, now: number): Promise<boolean> {
    const changed = await this.db.run(
      `UPDATE checkpoints SET ship_claim = ?, ship_claim_until = ?
       WHERE id = ? AND shipped_at IS NULL AND (ship_claim IS NULL OR ship_claim = ? OR ship_claim_until < ?)`,
      [holder, until, checkpointId, holder, now],
    );
    return changed > 0;
  }

  async releaseShipment(checkpointId: string, holder: string): Promise<void> {
    await this.db.run('UPDATE checkpoints SET ship_claim = NULL, ship_claim_until = NULL WHERE id = ? AND ship_claim = ?', [checkpointId, holder]);
  }

  async listAbandonedShipments(now: number): Promise<CheckpointRow[]> {
    const rows = await this.db.all<CheckpointDbRow>(
      'SELECT * FROM checkpoints WHERE shipped_at IS NULL AND ship_claim IS NOT NULL AND ship_claim_until < ? ORDER BY created_at, id',
      [now],
    );
    return rows.map(toCheckpoint);
  }

  async insertShipBase(row: ShipBaseRow): Promise<void> {
    await this.db.run('INSERT INTO ship_bases (id, session_id, object, volume_objects, created_at) VALUES (?, ?, ?, ?, ?)', [
      row.id,
      row.sessionId,
      JSON.stringify(row.object),
      JSON.stringify(row.volumeObjects),
      row.createdAt,
    ]);
    await this.retireShipBases(this.db, row.sessionId);
  }

  /**
   * Marks the session's bases that no longer are its newest, or all of them once it is deleted, as
   * retired: what the sweep of unused bases reads (those no checkpoint is stored against go), so it
   * never reads every base, checkpoint and session.
   */
  private async retireShipBases(db: SqlExecutor, sessionId: string): Promise<void> {
    await db.run(
      `UPDATE ship_bases SET retired = 1 WHERE session_id = ? AND retired = 0
         AND (NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = ?)
              OR id <> (SELECT n.id FROM ship_bases n WHERE n.session_id = ? ORDER BY n.created_at DESC, n.id DESC LIMIT 1))`,
      [sessionId, sessionId, sessionId],
    );
  }

  async getShipBase(id: string): Promise<ShipBaseRow | null> {
    const row = await this.db.get<ShipBaseDbRow>('SELECT * FROM ship_bases WHERE id = ?', [id]);
    return row ? toShipBase(row) : null;
  }

  async newestShipBase(sessionId: string): Promise<ShipBaseRow | null> {
    const row = await this.db.get<ShipBaseDbRow>('SELECT * FROM ship_bases WHERE session_id = ? ORDER BY created_at DESC, id DESC LIMIT 1', [sessionId]);
    return row ? toShipBase(row) : null;
  }

  async unusedShipBases(): Promise<ShipBaseRow[]> {
    const rows = await this.db.all<ShipBaseDbRow>(
      `SELECT b.* FROM ship_bases b
       WHERE b.retired = 1 AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.shipped_base_id = b.id)
       ORDER BY b.created_at, b.id`,
    );
    return rows.map(toShipBase);
  }

  async deleteShipBase(id: string): Promise<void> {
    await this.db.run('DELETE FROM ship_bases WHERE id = ?', [id]);
  }

  async adoptUnplaced(nodeId: string): Promise<void> {
    await this.db.run('UPDATE sessions SET volume_node_id = ? WHERE volume_node_id IS NULL', [nodeId]);
    await this.db.run('UPDATE templates SET node_id = ? WHERE node_id IS NULL', [nodeId]);
  }

  async insertVolume(row: VolumeRow): Promise<boolean> {
    try {
      await this.db.run(
        'INSERT INTO volumes (id, tenant_id, name, node_id, size_gb, created_at, from_snapshot, owner_session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        [row.id, row.tenantId, row.name, row.nodeId, row.sizeGb, row.createdAt, row.fromSnapshot, row.ownerSessionId],
      );
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async getVolume(tenantId: string, name: string): Promise<VolumeRow | null> {
    const row = await this.db.get<VolumeDbRow>('SELECT * FROM volumes WHERE tenant_id = ? AND name = ?', [tenantId, name]);
    return row ? toVolume(row) : null;
  }

  async findVolume(id: string): Promise<VolumeRow | null> {
    const row = await this.db.get<VolumeDbRow>('SELECT * FROM volumes WHERE id = ?', [id]);
    return row ? toVolume(row) : null;
  }

  async listVolumes(tenantId: string): Promise<VolumeRow[]> {
    return (await this.db.all<VolumeDbRow>('SELECT * FROM volumes WHERE tenant_id = ? ORDER BY name', [tenantId])).map(toVolume);
  }

  async listOwnedVolumes(sessionId: string): Promise<VolumeRow[]> {
    return (await this.db.all<VolumeDbRow>('SELECT * FROM volumes WHERE owner_session_id = ? ORDER BY name', [sessionId])).map(toVolume);
  }

  async deleteVolume(id: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.run('DELETE FROM volume_snapshots WHERE volume_id = ?', [id]);
      await tx.run('DELETE FROM volumes WHERE id = ?', [id]);
    });
  }

  async insertVolumeSnapshot(row: VolumeSnapshotRow): Promise<void> {
    await this.db.run('INSERT INTO volume_snapshots (id, tenant_id, volume_id, node_id, created_at) VALUES (?, ?, ?, ?, ?)', [
      row.id,
      row.tenantId,
      row.volumeId,
      row.nodeId,
      row.createdAt,
    ]);
  }

  async getVolumeSnapshot(tenantId: string, id: string): Promise<VolumeSnapshotRow | null> {
    const row = await this.db.get<VolumeSnapshotDbRow>('SELECT * FROM volume_snapshots WHERE tenant_id = ? AND id = ?', [tenantId, id]);
    return row ? toVolumeSnapshot(row) : null;
  }

  async listVolumeSnapshots(volumeId: string): Promise<VolumeSnapshotRow[]> {
    return (await this.db.all<VolumeSnapshotDbRow>('SELECT * FROM volume_snapshots WHERE volume_id = ? ORDER BY created_at, id', [volumeId])).map(
      toVolumeSnapshot,
    );
  }

  async deleteVolumeSnapshot(id: string): Promise<void> {
    await this.db.run('DELETE FROM volume_snapshots WHERE id = ?', [id]);
  }

  async claimVolumeMounts(mounts: VolumeMountRow[]): Promise<string | null> {
    if (mounts.length === 0) return null;
    try {
      // One statement, so all or none on both engines without a transaction.
      await this.db.run(
        `INSERT INTO volume_mounts (session_id, volume_id, path, read_only) VALUES ${mounts.map(() => '(?, ?, ?, ?)').join(', ')}`,
        mounts.flatMap((m) => [m.sessionId, m.volumeId, m.path, m.readOnly ? 1 : 0]),
      );
      return null;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      // Which volume: the first read-write one that another session now holds.
      for (const mount of mounts.filter((m) => !m.readOnly)) {
        const writer = await this.db.get<{ session_id: string }>('SELECT session_id FROM volume_mounts WHERE volume_id = ? AND read_only = 0', [
          mount.volumeId,
        ]);
        if (writer && writer.session_id !== mount.sessionId) return mount.volumeId;
      }
      return mounts[0]!.volumeId;
    }
  }

  async listVolumeMounts(volumeId: string): Promise<VolumeMountRow[]> {
    return (await this.db.all<VolumeMountDbRow>('SELECT * FROM volume_mounts WHERE volume_id = ? ORDER BY session_id', [volumeId])).map(toVolumeMount);
  }

  async loadByNode(): Promise<Map<string, NodeLoad>> {
    const rows = await this.db.all<{ node: string | null; sessions: number; active: number }>(
      `SELECT volume_node_id AS node, COUNT(*) AS sessions, SUM(CASE WHEN status IN ${activeStatuses} THEN 1 ELSE 0 END) AS active FROM sessions GROUP BY volume_node_id`,
    );
    return new Map(rows.filter((r) => r.node !== null).map((r) => [r.node!, { sessions: Number(r.sessions), active: Number(r.active) }]));
  }

  async activeByNode(): Promise<Map<string, number>> {
    // Kept by the database (usage-counters.ts): a row per node and shard, not a read of every session.
    const rows = await this.db.all<{ node: string; active: number }>(
      'SELECT node_id AS node, SUM(active) AS active FROM node_usage GROUP BY node_id HAVING SUM(active) <> 0',
    );
    return new Map(rows.map((r) => [r.node, Number(r.active)]));
  }

  applyUsageBatches(items: UsageBatchFrom[]): Promise<boolean[]> {
    return applyUsageBatches(this.db, items);
  }

  integrateCheckpointStorage(now: number, everyMs: number): Promise<boolean> {
    return integrateCheckpointStorage(this.db, now, everyMs);
  }

  usageGroups(query: UsageGroupQuery): Promise<UsageGroupRow[]> {
    return usageGroups(this.db, query);
  }

  usageTotals(): Promise<Map<string, UsageAmounts>> {
    return usageTotals(this.db);
  }

  background<T>(work: () => Promise<T>): Promise<T> {
    return this.db.background(work);
  }

  connections(): PoolUse | null {
    return this.db.connections();
  }

  close(): Promise<void> {
    return this.db.close();
  }
}
