import { chmodSync, existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import {
  toCheckpoint,
  toSecret,
  toSession,
  toTemplate,
  type CheckpointDbRow,
  type KeyDbRow,
  type SecretDbRow,
  type SessionDbRow,
  type TemplateDbRow,
} from './sqlite-rows.js';
import { addedColumns, schema } from './sqlite-schema.js';
import type {
  ApiKeyRow,
  CheckpointRow,
  SandboxHistoryRow,
  SecretRow,
  SessionLeaseRow,
  SessionPatch,
  SessionRow,
  Store,
  TemplateRow,
  TenantRow,
} from './store.js';

/** The embedded store: one SQLite file in the data directory, WAL mode. */
export class SqliteStore implements Store {
  private readonly db: Database.Database;

  constructor(file: string) {
    this.db = new Database(file);
    // The file holds secret values and key hashes: root only (the WAL files are made with the same mode).
    if (file !== ':memory:') for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) chmodSync(f, 0o600);
    this.db.pragma('journal_mode = WAL');
    // Several processes may share the file (control-plane replicas on one machine): wait for a writer instead of failing.
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('foreign_keys = ON');
    this.db.exec(schema);
    for (const [table, column, definition] of addedColumns) {
      const columns = this.db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[];
      if (!columns.some((c) => c.name === column)) this.db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);
    }
  }

  insertTenant(row: TenantRow): void {
    this.db.prepare('INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)').run(row.id, row.name, row.createdAt);
  }

  getTenant(id: string): TenantRow | null {
    const row = this.db.prepare('SELECT id, name, created_at FROM tenants WHERE id = ?').get(id) as
      | { id: string; name: string; created_at: string }
      | undefined;
    return row ? { id: row.id, name: row.name, createdAt: row.created_at } : null;
  }

  insertApiKey(row: ApiKeyRow): void {
    this.db
      .prepare('INSERT INTO api_keys (id, tenant_id, hash, admin, created_at) VALUES (?, ?, ?, ?, ?)')
      .run(row.id, row.tenantId, row.hash, row.admin ? 1 : 0, row.createdAt);
  }

  findApiKey(hash: string): ApiKeyRow | null {
    const row = this.db.prepare('SELECT * FROM api_keys WHERE hash = ?').get(hash) as KeyDbRow | undefined;
    return row ? { id: row.id, tenantId: row.tenant_id, hash: row.hash, admin: row.admin === 1, createdAt: row.created_at } : null;
  }

  replaceAdminKey(row: ApiKeyRow): void {
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM api_keys WHERE admin = 1 AND hash != ?').run(row.hash);
      if (!this.findApiKey(row.hash)) this.insertApiKey(row);
    })();
  }

  insertSession(row: SessionRow): void {
    this.db
      .prepare(
        'INSERT INTO sessions (id, tenant_id, template, status, created_at, env, resources, metadata, sandbox_id, node_id, sandbox_started_at, parent_checkpoint_id, checkpoint_interval_sec, idle_timeout_sec, full_checkpoint_interval_sec, on_resume, secrets, egress) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      )
      .run(
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
        JSON.stringify(row.secrets),
        JSON.stringify(row.egress),
      );
  }

  getSession(tenantId: string, id: string): SessionRow | null {
    const row = this.db.prepare('SELECT * FROM sessions WHERE id = ? AND tenant_id = ?').get(id, tenantId) as SessionDbRow | undefined;
    return row ? toSession(row) : null;
  }

  listSessions(tenantId: string): SessionRow[] {
    return (this.db.prepare('SELECT * FROM sessions WHERE tenant_id = ? ORDER BY created_at, id').all(tenantId) as SessionDbRow[]).map(toSession);
  }

  listAllSessions(): SessionRow[] {
    return (this.db.prepare('SELECT * FROM sessions ORDER BY created_at, id').all() as SessionDbRow[]).map(toSession);
  }

  countSessions(tenantId: string): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM sessions WHERE tenant_id = ?').get(tenantId) as { n: number }).n;
  }

  updateSession(id: string, patch: SessionPatch): void {
    const columns: Record<keyof SessionPatch, string> = {
      status: 'status',
      sandboxId: 'sandbox_id',
      nodeId: 'node_id',
      sandboxStartedAt: 'sandbox_started_at',
      resumeNote: 'resume_note',
    };
    const keys = Object.keys(patch) as (keyof SessionPatch)[];
    if (keys.length === 0) return;
    const sets = keys.map((k) => `${columns[k]} = ?`).join(', ');
    this.db.prepare(`UPDATE sessions SET ${sets} WHERE id = ?`).run(...keys.map((k) => patch[k] ?? null), id);
  }

  deleteSession(id: string): void {
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM sessions WHERE id = ?').run(id);
      this.db.prepare('DELETE FROM sandbox_history WHERE session_id = ?').run(id);
    })();
  }

  insertCheckpoint(row: CheckpointRow): void {
    this.db
      .prepare(
        'INSERT INTO checkpoints (id, session_id, tenant_id, kind, trigger, node_id, created_at, size_bytes, pause_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      )
      .run(row.id, row.sessionId, row.tenantId, row.kind, row.trigger, row.nodeId, row.createdAt, row.sizeBytes, row.pauseMs);
  }

  getCheckpoint(tenantId: string, id: string): CheckpointRow | null {
    const row = this.db.prepare('SELECT * FROM checkpoints WHERE id = ? AND tenant_id = ?').get(id, tenantId) as CheckpointDbRow | undefined;
    return row ? toCheckpoint(row) : null;
  }

  checkpointExists(id: string): boolean {
    return this.db.prepare('SELECT 1 FROM checkpoints WHERE id = ?').get(id) !== undefined;
  }

  checkpointBytes(tenantId: string): number {
    return (this.db.prepare('SELECT COALESCE(SUM(size_bytes), 0) AS n FROM checkpoints WHERE tenant_id = ?').get(tenantId) as { n: number }).n;
  }

  listCheckpoints(sessionId: string): CheckpointRow[] {
    return (this.db.prepare('SELECT * FROM checkpoints WHERE session_id = ? ORDER BY created_at, id').all(sessionId) as CheckpointDbRow[]).map(toCheckpoint);
  }

  deleteCheckpoint(id: string): void {
    this.db.prepare('DELETE FROM checkpoints WHERE id = ?').run(id);
  }

  isForkParent(checkpointId: string): boolean {
    return this.db.prepare('SELECT 1 FROM sessions WHERE parent_checkpoint_id = ? LIMIT 1').get(checkpointId) !== undefined;
  }

  listChildren(sessionId: string): SessionRow[] {
    const rows = this.db
      .prepare('SELECT s.* FROM sessions s JOIN checkpoints c ON s.parent_checkpoint_id = c.id WHERE c.session_id = ? ORDER BY s.created_at, s.id')
      .all(sessionId) as SessionDbRow[];
    return rows.map(toSession);
  }

  recordSandboxStart(row: SandboxHistoryRow): void {
    this.db
      .prepare(
        'INSERT OR IGNORE INTO sandbox_history (id, session_id, node_id, started_at, ended_at, end_reason, restored_from, note) VALUES (?, ?, ?, ?, NULL, NULL, ?, ?)',
      )
      .run(row.id, row.sessionId, row.nodeId, row.startedAt, row.restoredFrom, row.note);
  }

  recordSandboxEnd(sandboxId: string, reason: string): void {
    this.db
      .prepare('UPDATE sandbox_history SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL')
      .run(new Date().toISOString(), reason, sandboxId);
  }

  listSandboxHistory(sessionId: string): SandboxHistoryRow[] {
    const rows = this.db.prepare('SELECT * FROM sandbox_history WHERE session_id = ? ORDER BY started_at, id').all(sessionId) as {
      id: string;
      session_id: string;
      node_id: string;
      started_at: string;
      ended_at: string | null;
      end_reason: string | null;
      restored_from: string | null;
      note: string | null;
    }[];
    return rows.map((r) => ({
      id: r.id,
      sessionId: r.session_id,
      nodeId: r.node_id,
      startedAt: r.started_at,
      endedAt: r.ended_at,
      endReason: r.end_reason,
      restoredFrom: r.restored_from,
      note: r.note,
    }));
  }

  setSessionEgress(id: string, egress: SessionRow['egress']): void {
    this.db.prepare('UPDATE sessions SET egress = ? WHERE id = ?').run(JSON.stringify(egress), id);
  }

  acquireSessionLease(lease: SessionLeaseRow, now: number): boolean {
    const result = this.db
      .prepare(
        'INSERT INTO session_leases (session_id, holder, operation, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, operation = excluded.operation, expires_at = excluded.expires_at WHERE session_leases.expires_at <= ?',
      )
      .run(lease.sessionId, lease.holder, lease.operation, lease.expiresAt, now);
    return result.changes > 0;
  }

  renewSessionLease(sessionId: string, holder: string, expiresAt: number): boolean {
    return this.db.prepare('UPDATE session_leases SET expires_at = ? WHERE session_id = ? AND holder = ?').run(expiresAt, sessionId, holder).changes > 0;
  }

  releaseSessionLease(sessionId: string, holder: string): void {
    this.db.prepare('DELETE FROM session_leases WHERE session_id = ? AND holder = ?').run(sessionId, holder);
  }

  getSessionLease(sessionId: string): SessionLeaseRow | null {
    const row = this.db.prepare('SELECT * FROM session_leases WHERE session_id = ?').get(sessionId) as
      | { session_id: string; holder: string; operation: string; expires_at: number }
      | undefined;
    return row ? { sessionId: row.session_id, holder: row.holder, operation: row.operation, expiresAt: row.expires_at } : null;
  }

  putSecret(row: SecretRow): SecretRow {
    this.db
      .prepare(
        'INSERT INTO secrets (tenant_id, name, value, hosts, placeholder, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value, hosts = excluded.hosts, updated_at = excluded.updated_at',
      )
      .run(row.tenantId, row.name, row.value, JSON.stringify(row.hosts), row.placeholder, row.createdAt, row.updatedAt);
    return this.getSecret(row.tenantId, row.name)!;
  }

  getSecret(tenantId: string, name: string): SecretRow | null {
    const row = this.db.prepare('SELECT * FROM secrets WHERE tenant_id = ? AND name = ?').get(tenantId, name) as SecretDbRow | undefined;
    return row ? toSecret(row) : null;
  }

  listSecrets(tenantId: string): SecretRow[] {
    return (this.db.prepare('SELECT * FROM secrets WHERE tenant_id = ? ORDER BY name').all(tenantId) as SecretDbRow[]).map(toSecret);
  }

  deleteSecret(tenantId: string, name: string): boolean {
    return this.db.prepare('DELETE FROM secrets WHERE tenant_id = ? AND name = ?').run(tenantId, name).changes > 0;
  }

  insertTemplate(row: TemplateRow): void {
    this.db
      .prepare('INSERT INTO templates (id, tenant_id, name, version, from_checkpoint, created_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(row.id, row.tenantId, row.name, row.version, row.fromCheckpoint, row.createdAt);
  }

  listTemplates(tenantId: string): TemplateRow[] {
    return (this.db.prepare('SELECT * FROM templates WHERE tenant_id = ? ORDER BY name, version').all(tenantId) as TemplateDbRow[]).map(toTemplate);
  }

  deleteTemplate(id: string): void {
    this.db.prepare('DELETE FROM templates WHERE id = ?').run(id);
  }

  close(): void {
    this.db.close();
  }
}
