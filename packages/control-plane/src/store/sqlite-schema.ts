/** The SQLite store's tables, created if missing. */
export const schema = `
CREATE TABLE IF NOT EXISTS tenants (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys (
  id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id), hash TEXT NOT NULL UNIQUE,
  admin INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id), template TEXT NOT NULL,
  status TEXT NOT NULL, created_at TEXT NOT NULL, env TEXT NOT NULL, resources TEXT NOT NULL,
  metadata TEXT NOT NULL, sandbox_id TEXT, node_id TEXT, sandbox_started_at TEXT);
CREATE INDEX IF NOT EXISTS sessions_tenant ON sessions(tenant_id, created_at);
CREATE TABLE IF NOT EXISTS checkpoints (
  id TEXT PRIMARY KEY, session_id TEXT NOT NULL, tenant_id TEXT NOT NULL, kind TEXT NOT NULL,
  trigger TEXT NOT NULL, node_id TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS checkpoints_session ON checkpoints(session_id, created_at);
CREATE INDEX IF NOT EXISTS checkpoints_tenant ON checkpoints(tenant_id);
CREATE TABLE IF NOT EXISTS sandbox_history (
  id TEXT PRIMARY KEY, session_id TEXT NOT NULL, node_id TEXT NOT NULL, started_at TEXT NOT NULL,
  ended_at TEXT, end_reason TEXT);
CREATE INDEX IF NOT EXISTS sandbox_history_session ON sandbox_history(session_id, started_at);
CREATE TABLE IF NOT EXISTS secrets (
  tenant_id TEXT NOT NULL REFERENCES tenants(id), name TEXT NOT NULL, value TEXT NOT NULL,
  hosts TEXT NOT NULL, placeholder TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  PRIMARY KEY (tenant_id, name));
CREATE TABLE IF NOT EXISTS templates (
  id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id), name TEXT NOT NULL,
  version INTEGER NOT NULL, from_checkpoint TEXT NOT NULL, created_at TEXT NOT NULL,
  UNIQUE (tenant_id, name, version));
CREATE TABLE IF NOT EXISTS session_leases (
  session_id TEXT PRIMARY KEY, holder TEXT NOT NULL, operation TEXT NOT NULL, expires_at INTEGER NOT NULL);
`;

/** Columns added after the first release, applied to older database files on open. */
export const addedColumns: [table: string, column: string, definition: string][] = [
  ['sessions', 'parent_checkpoint_id', 'TEXT'],
  ['sessions', 'checkpoint_interval_sec', 'INTEGER NOT NULL DEFAULT 60'],
  ['sessions', 'idle_timeout_sec', 'INTEGER NOT NULL DEFAULT 900'],
  ['sessions', 'full_checkpoint_interval_sec', 'INTEGER NOT NULL DEFAULT 600'],
  ['checkpoints', 'size_bytes', 'INTEGER'],
  ['checkpoints', 'pause_ms', 'INTEGER'],
  ['sandbox_history', 'restored_from', 'TEXT'],
  ['sessions', 'secrets', `TEXT NOT NULL DEFAULT '[]'`],
  ['sessions', 'egress', `TEXT NOT NULL DEFAULT '{"mode":"allow-all","domains":[],"cidrs":[]}'`],
  ['sandbox_history', 'note', 'TEXT'],
  ['sessions', 'on_resume', `TEXT NOT NULL DEFAULT 'processes'`],
  ['sessions', 'resume_note', 'TEXT'],
];
