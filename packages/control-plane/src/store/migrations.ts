import type { SqlExecutor } from './sql-database.js';
import { objectStoreUsageSchema, usageSchema } from './usage-records.js';
import {
  activeStatuses,
  counterTable,
  nodeUsageTriggers,
  deferredStatusCountTriggers,
  orderedCounterFunctions,
  statusCountTriggers,
  tenantUsageTriggers,
} from './usage-counters.js';

export type Dialect = 'sqlite' | 'postgres';

/** One step of the schema; applied once, in order, and recorded in `schema_migrations`. */
export interface Migration {
  version: number;
  description: string;
  statements(dialect: Dialect): string[];
}

/**
 * Text compared byte by byte on both engines: timestamps (ISO 8601) and ids sort the same
 * whatever locale a PostgreSQL database was created with.
 */
const text = (dialect: Dialect): string => (dialect === 'postgres' ? 'TEXT COLLATE "C"' : 'TEXT');

/**
 * The schema, versioned. Never edit a released migration: add one. A SQLite file from before
 * versioned migrations is brought to version 1 by `SqliteDatabase` (its columns were added one by one).
 */
export const migrations: Migration[] = [
  {
    version: 1,
    description: 'tenants, keys, sessions, checkpoints, sandbox history, secrets, templates, leases',
    statements: (dialect) => {
      const t = text(dialect);
      return [
        `CREATE TABLE IF NOT EXISTS tenants (id ${t} PRIMARY KEY, name ${t} NOT NULL, created_at ${t} NOT NULL)`,
        `CREATE TABLE IF NOT EXISTS api_keys (
          id ${t} PRIMARY KEY, tenant_id ${t} NOT NULL REFERENCES tenants(id), hash ${t} NOT NULL UNIQUE,
          admin INTEGER NOT NULL DEFAULT 0, created_at ${t} NOT NULL)`,
        `CREATE TABLE IF NOT EXISTS sessions (
          id ${t} PRIMARY KEY, tenant_id ${t} NOT NULL REFERENCES tenants(id), template ${t} NOT NULL,
          status ${t} NOT NULL, created_at ${t} NOT NULL, env ${t} NOT NULL, resources ${t} NOT NULL,
          metadata ${t} NOT NULL, sandbox_id ${t}, node_id ${t}, sandbox_started_at ${t},
          parent_checkpoint_id ${t}, checkpoint_interval_sec INTEGER NOT NULL DEFAULT 60,
          idle_timeout_sec INTEGER NOT NULL DEFAULT 900, full_checkpoint_interval_sec INTEGER NOT NULL DEFAULT 600,
          secrets ${t} NOT NULL DEFAULT '[]',
          egress ${t} NOT NULL DEFAULT '{"mode":"allow-all","domains":[],"cidrs":[]}',
          on_resume ${t} NOT NULL DEFAULT 'processes', resume_note ${t})`,
        'CREATE INDEX IF NOT EXISTS sessions_tenant ON sessions(tenant_id, created_at)',
        'CREATE INDEX IF NOT EXISTS sessions_parent ON sessions(parent_checkpoint_id)',
        `CREATE TABLE IF NOT EXISTS checkpoints (
          id ${t} PRIMARY KEY, session_id ${t} NOT NULL, tenant_id ${t} NOT NULL, kind ${t} NOT NULL,
          trigger ${t} NOT NULL, node_id ${t} NOT NULL, created_at ${t} NOT NULL, size_bytes BIGINT, pause_ms INTEGER)`,
        'CREATE INDEX IF NOT EXISTS checkpoints_session ON checkpoints(session_id, created_at)',
        'CREATE INDEX IF NOT EXISTS checkpoints_tenant ON checkpoints(tenant_id)',
        `CREATE TABLE IF NOT EXISTS sandbox_history (
          id ${t} PRIMARY KEY, session_id ${t} NOT NULL, node_id ${t} NOT NULL, started_at ${t} NOT NULL,
          ended_at ${t}, end_reason ${t}, restored_from ${t}, note ${t})`,
        'CREATE INDEX IF NOT EXISTS sandbox_history_session ON sandbox_history(session_id, started_at)',
        `CREATE TABLE IF NOT EXISTS secrets (
          tenant_id ${t} NOT NULL REFERENCES tenants(id), name ${t} NOT NULL, value ${t} NOT NULL,
          hosts ${t} NOT NULL, placeholder ${t} NOT NULL, created_at ${t} NOT NULL, updated_at ${t} NOT NULL,
          PRIMARY KEY (tenant_id, name))`,
        `CREATE TABLE IF NOT EXISTS templates (
          id ${t} PRIMARY KEY, tenant_id ${t} NOT NULL REFERENCES tenants(id), name ${t} NOT NULL,
          version INTEGER NOT NULL, from_checkpoint ${t} NOT NULL, created_at ${t} NOT NULL,
          UNIQUE (tenant_id, name, version))`,
        `CREATE TABLE IF NOT EXISTS session_leases (
          session_id ${t} PRIMARY KEY, holder ${t} NOT NULL, operation ${t} NOT NULL, expires_at BIGINT NOT NULL)`,
      ];
    },
  },
  {
    version: 2,
    description: 'sessions.last_active_at: idleness seen by every control plane',
    statements: (dialect) => [`ALTER TABLE sessions ADD COLUMN last_active_at ${text(dialect)}`],
  },
  {
    version: 3,
    description: 'nodes (registered by heartbeats), the node holding each session volume and template',
    statements: (dialect) => {
      const t = text(dialect);
      return [
        `CREATE TABLE IF NOT EXISTS nodes (
          id ${t} PRIMARY KEY, url ${t} NOT NULL, token ${t} NOT NULL, status ${t} NOT NULL DEFAULT 'ready',
          capacity ${t} NOT NULL, sandboxes INTEGER NOT NULL DEFAULT 0, registered_at ${t} NOT NULL, last_heartbeat_at ${t} NOT NULL)`,
        `ALTER TABLE sessions ADD COLUMN volume_node_id ${t}`,
        'CREATE INDEX IF NOT EXISTS sessions_volume_node ON sessions(volume_node_id)',
        `ALTER TABLE templates ADD COLUMN node_id ${t}`,
      ];
    },
  },
  {
    version: 4,
    description: 'checkpoints shipped to the object store, and the bases they are differences to',
    statements: (dialect) => {
      const t = text(dialect);
      return [
        `ALTER TABLE checkpoints ADD COLUMN shipped_at ${t}`,
        `ALTER TABLE checkpoints ADD COLUMN shipped_base_id ${t}`,
        `ALTER TABLE checkpoints ADD COLUMN shipped_objects ${t}`,
        `CREATE TABLE IF NOT EXISTS ship_bases (
          id ${t} PRIMARY KEY, session_id ${t} NOT NULL, object ${t} NOT NULL, created_at ${t} NOT NULL)`,
        'CREATE INDEX IF NOT EXISTS ship_bases_session ON ship_bases(session_id, created_at)',
      ];
    },
  },
  {
    version: 5,
    description: 'session timeouts, and keys that act on one session only',
    statements: (dialect) => {
      const t = text(dialect);
      return [
        `ALTER TABLE sessions ADD COLUMN expires_at ${t}`,
        `ALTER TABLE sessions ADD COLUMN on_timeout ${t} NOT NULL DEFAULT 'delete'`,
        `ALTER TABLE api_keys ADD COLUMN session_id ${t}`,
        'CREATE INDEX IF NOT EXISTS api_keys_session ON api_keys(session_id)',
      ];
    },
  },
  {
    version: 6,
    description: 'preview tokens: keys for one port of one session, until they expire',
    statements: (dialect) => {
      const t = text(dialect);
      return [`ALTER TABLE api_keys ADD COLUMN scope ${t}`, `ALTER TABLE api_keys ADD COLUMN expires_at ${t}`];
    },
  },
  {
    version: 7,
    description: "sessions' services",
    statements: (dialect) => [`ALTER TABLE sessions ADD COLUMN services ${text(dialect)} NOT NULL DEFAULT '[]'`],
  },
  {
    version: 8,
    description: "tenants' volumes, their snapshots, which sessions mount them (one writer each), and the volumes in checkpoints",
    statements: (dialect) => {
      const t = text(dialect);
      const real = dialect === 'postgres' ? 'DOUBLE PRECISION' : 'REAL';
      return [
        `CREATE TABLE IF NOT EXISTS volumes (
          id ${t} PRIMARY KEY, tenant_id ${t} NOT NULL REFERENCES tenants(id), name ${t} NOT NULL, node_id ${t} NOT NULL,
          size_gb ${real} NOT NULL, created_at ${t} NOT NULL, from_snapshot ${t}, owner_session_id ${t},
          UNIQUE (tenant_id, name))`,
        'CREATE INDEX IF NOT EXISTS volumes_owner ON volumes(owner_session_id)',
        `CREATE TABLE IF NOT EXISTS volume_snapshots (
          id ${t} PRIMARY KEY, tenant_id ${t} NOT NULL, volume_id ${t} NOT NULL, node_id ${t} NOT NULL, created_at ${t} NOT NULL)`,
        'CREATE INDEX IF NOT EXISTS volume_snapshots_volume ON volume_snapshots(volume_id, created_at)',
        `CREATE TABLE IF NOT EXISTS volume_mounts (
          session_id ${t} NOT NULL, volume_id ${t} NOT NULL, path ${t} NOT NULL, read_only INTEGER NOT NULL,
          PRIMARY KEY (session_id, volume_id))`,
        // One session at a time mounts a volume read-write: a second claim fails on this index, whichever control plane makes it.
        'CREATE UNIQUE INDEX IF NOT EXISTS volume_mounts_one_writer ON volume_mounts(volume_id) WHERE read_only = 0',
        'CREATE INDEX IF NOT EXISTS volume_mounts_volume ON volume_mounts(volume_id)',
        `ALTER TABLE sessions ADD COLUMN volumes ${t} NOT NULL DEFAULT '[]'`,
        `ALTER TABLE checkpoints ADD COLUMN volumes ${t} NOT NULL DEFAULT '[]'`,
      ];
    },
  },
  {
    version: 9,
    description: "sessions' public ports (preview URLs without a key)",
    statements: (dialect) => [`ALTER TABLE sessions ADD COLUMN public_ports ${text(dialect)} NOT NULL DEFAULT '[]'`],
  },
  {
    version: 10,
    description: "templates built from Dockerfiles: their config, the builds and their logs, the tenants' step caches",
    statements: (dialect) => {
      const t = text(dialect);
      return [
        `ALTER TABLE templates ADD COLUMN config ${t}`,
        `CREATE TABLE IF NOT EXISTS template_builds (
          id ${t} PRIMARY KEY, tenant_id ${t} NOT NULL, name ${t} NOT NULL, status ${t} NOT NULL, created_at ${t} NOT NULL,
          ended_at ${t}, error ${t}, version INTEGER, steps INTEGER NOT NULL DEFAULT 0, cached_steps INTEGER NOT NULL DEFAULT 0,
          log ${t} NOT NULL DEFAULT '')`,
        `CREATE TABLE IF NOT EXISTS template_build_cache (
          tenant_id ${t} NOT NULL, cache_key ${t} NOT NULL, template_id ${t} NOT NULL, created_at ${t} NOT NULL,
          PRIMARY KEY (tenant_id, cache_key))`,
      ];
    },
  },
  {
    version: 11,
    description: "builds' sessions and heartbeats: a build whose control plane died is failed and its session deleted",
    statements: (dialect) => [
      `ALTER TABLE template_builds ADD COLUMN session_id ${text(dialect)}`,
      `ALTER TABLE template_builds ADD COLUMN heartbeat_at ${text(dialect)}`,
    ],
  },
  {
    version: 12,
    description: 'volumes left on a lost node by the sessions that moved off it: rescued into a checkpoint when the node is back',
    statements: (dialect) => [
      `CREATE TABLE IF NOT EXISTS left_volumes (
        session_id ${text(dialect)} NOT NULL, node_id ${text(dialect)} NOT NULL, left_at ${text(dialect)} NOT NULL,
        PRIMARY KEY (session_id, node_id))`,
    ],
  },
  {
    version: 13,
    description: "sessions' default working directory (their template's WORKDIR)",
    statements: (dialect) => [`ALTER TABLE sessions ADD COLUMN cwd ${text(dialect)}`],
  },
  {
    version: 14,
    description: "how long after a code cell sessions' kernels are held by a full checkpoint",
    statements: () => ['ALTER TABLE sessions ADD COLUMN code_checkpoint_delay_ms INTEGER NOT NULL DEFAULT 1000'],
  },
  {
    version: 15,
    description: 'the egress audit of sandboxes that served a session on a node since left, kept before that node deletes its own',
    statements: (dialect) => [
      `CREATE TABLE IF NOT EXISTS egress_audit (
        session_id ${text(dialect)} NOT NULL, entry_key ${text(dialect)} NOT NULL, time ${text(dialect)} NOT NULL, entry ${text(dialect)} NOT NULL,
        PRIMARY KEY (session_id, entry_key))`,
      'CREATE INDEX IF NOT EXISTS egress_audit_by_time ON egress_audit (session_id, time)',
    ],
  },
  {
    version: 16,
    description: "idempotency keys: a retried call's first outcome, kept for a while across control planes",
    statements: (dialect) => [
      `CREATE TABLE IF NOT EXISTS idempotency_keys (
        tenant_id ${text(dialect)} NOT NULL, idem_key ${text(dialect)} NOT NULL, operation ${text(dialect)} NOT NULL,
        status INTEGER, body ${text(dialect)}, expires_at BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, idem_key))`,
    ],
  },
  {
    version: 17,
    description: "nodes' own credentials (instead of the admin key) and the one-time join tokens that issue them",
    statements: (dialect) => [
      `CREATE TABLE IF NOT EXISTS node_join_tokens (
        hash ${text(dialect)} PRIMARY KEY, created_at ${text(dialect)} NOT NULL, expires_at ${text(dialect)} NOT NULL,
        used_by ${text(dialect)}, used_at ${text(dialect)})`,
      `CREATE TABLE IF NOT EXISTS node_credentials (
        node_id ${text(dialect)} PRIMARY KEY, hash ${text(dialect)} NOT NULL UNIQUE, created_at ${text(dialect)} NOT NULL, revoked_at ${text(dialect)})`,
    ],
  },
  {
    version: 18,
    description: "tenants' data keys, which their checkpoint objects are sealed with, wrapped by the cluster key",
    statements: (dialect) => [
      `CREATE TABLE IF NOT EXISTS data_keys (
        id ${text(dialect)} PRIMARY KEY, tenant_id ${text(dialect)} NOT NULL UNIQUE, wrapped ${text(dialect)} NOT NULL, created_at ${text(dialect)} NOT NULL)`,
    ],
  },
  {
    version: 19,
    description: "placement epochs: every placement of a session counted, a fencing token for the nodes' calls",
    statements: () => ['ALTER TABLE sessions ADD COLUMN placement_epoch BIGINT NOT NULL DEFAULT 0'],
  },
  {
    version: 20,
    description: "volumes in the object store (a base's copies of its session's volumes, the volumes a session left on a lost node); shipments claimed",
    statements: () => [
      "ALTER TABLE ship_bases ADD COLUMN volume_objects TEXT NOT NULL DEFAULT '[]'",
      "ALTER TABLE left_volumes ADD COLUMN named_volume_ids TEXT NOT NULL DEFAULT '[]'",
      // Who ships a checkpoint now, until when: another control plane takes over an expired claim at once.
      'ALTER TABLE checkpoints ADD COLUMN ship_claim TEXT',
      'ALTER TABLE checkpoints ADD COLUMN ship_claim_until BIGINT',
    ],
  },
  {
    version: 21,
    description: 'what periodic work looks up, indexed: sessions with a sandbox, by node, by expiry; unshipped checkpoints',
    statements: () => [
      'CREATE INDEX IF NOT EXISTS sessions_sandbox ON sessions(sandbox_id)',
      'CREATE INDEX IF NOT EXISTS sessions_node ON sessions(node_id)',
      'CREATE INDEX IF NOT EXISTS sessions_expires ON sessions(expires_at)',
      'CREATE INDEX IF NOT EXISTS sessions_status ON sessions(status)',
      'CREATE INDEX IF NOT EXISTS checkpoints_unshipped ON checkpoints(shipped_at)',
    ],
  },
  {
    version: 22,
    description: 'the control planes sharing the store, as each last said it was alive',
    statements: (dialect) => [`CREATE TABLE IF NOT EXISTS control_planes (id ${text(dialect)} PRIMARY KEY, heard_at BIGINT NOT NULL)`],
  },
  {
    version: 23,
    description: 'when maintenance next has something to do for a session with a sandbox (ms since the epoch; null: at once), indexed by node',
    statements: () => [
      'ALTER TABLE sessions ADD COLUMN maintain_after BIGINT',
      'CREATE INDEX IF NOT EXISTS sessions_node_maintain ON sessions(node_id, maintain_after)',
    ],
  },
  {
    version: 24,
    description: "each tenant's sessions and checkpoint storage, counted by the database as rows come and go",
    statements: (dialect) => [
      counterTable('tenant_usage', { column: 'tenant_id', type: text(dialect) }, ['sessions', 'checkpoint_bytes']),
      ...tenantUsageTriggers(dialect),
      // Counted once from the rows; the triggers keep it from here (on PostgreSQL, inserts by other
      // control planes wait for this transaction, as it changed their tables). `WHERE true`: SQLite
      // reads an ON CONFLICT right after a SELECT's FROM as a join's.
      `INSERT INTO tenant_usage (tenant_id, shard, sessions, checkpoint_bytes)
        SELECT t.id, 0, (SELECT COUNT(*) FROM sessions s WHERE s.tenant_id = t.id),
          (SELECT COALESCE(SUM(c.size_bytes), 0) FROM checkpoints c WHERE c.tenant_id = t.id) FROM tenants t
        WHERE true ON CONFLICT (tenant_id, shard) DO UPDATE SET sessions = excluded.sessions, checkpoint_bytes = excluded.checkpoint_bytes`,
    ],
  },
  {
    version: 25,
    description: 'the sessions starting or running on each node, counted by the database as rows come, go and change',
    statements: (dialect) => [
      counterTable('node_usage', { column: 'node_id', type: text(dialect) }, ['active']),
      ...nodeUsageTriggers(dialect),
      `INSERT INTO node_usage (node_id, shard, active)
        SELECT volume_node_id, 0, COUNT(*) FROM sessions WHERE status IN ${activeStatuses} AND volume_node_id IS NOT NULL GROUP BY volume_node_id
        ON CONFLICT (node_id, shard) DO UPDATE SET active = excluded.active`,
    ],
  },
  {
    version: 26,
    description: 'the sessions in each status, counted by the database as rows come, go and change',
    statements: (dialect) => [
      counterTable('status_counts', { column: 'status', type: text(dialect) }, ['sessions']),
      ...statusCountTriggers(dialect),
      `INSERT INTO status_counts (status, shard, sessions) SELECT status, 0, COUNT(*) FROM sessions WHERE true GROUP BY status
        ON CONFLICT (status, shard) DO UPDATE SET sessions = excluded.sessions`,
    ],
  },
  {
    version: 27,
    description: 'join tokens usable by several nodes (a Kubernetes DaemonSet shares one): how many may use each, how many did',
    statements: () => [
      'ALTER TABLE node_join_tokens ADD COLUMN uses INTEGER NOT NULL DEFAULT 1',
      'ALTER TABLE node_join_tokens ADD COLUMN used_count INTEGER NOT NULL DEFAULT 0',
      'UPDATE node_join_tokens SET used_count = 1 WHERE used_by IS NOT NULL',
    ],
  },
  {
    version: 28,
    description: "usage metering: each session's use per hour, each tenant's totals, the node batches applied, the checkpoint storage clock",
    statements: usageSchema,
  },
  {
    version: 29,
    description: "usage metering of the object store: each shipped checkpoint's bytes there, each tenant's sum, its metered amount",
    statements: objectStoreUsageSchema,
  },
  {
    version: 30,
    description: "counters' rows locked in one order where a session's status or node changes (PostgreSQL: changes in opposite directions deadlocked)",
    statements: orderedCounterFunctions,
  },
  {
    version: 31,
    description:
      "status_counts' rows locked only while a change commits (PostgreSQL: deferred triggers; a start's transaction held them across its round trips)",
    statements: deferredStatusCountTriggers,
  },
  {
    version: 32,
    description:
      'ship bases marked retired once their session is deleted or has a newer one, checkpoints indexed by their base: the sweep of unused bases reads those, not every base, checkpoint and session (800 ms at 100k sessions)',
    statements: () => [
      'ALTER TABLE ship_bases ADD COLUMN retired INTEGER NOT NULL DEFAULT 0',
      `UPDATE ship_bases SET retired = 1
        WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = ship_bases.session_id)
           OR EXISTS (SELECT 1 FROM ship_bases n WHERE n.session_id = ship_bases.session_id
                        AND (n.created_at > ship_bases.created_at OR (n.created_at = ship_bases.created_at AND n.id > ship_bases.id)))`,
      'CREATE INDEX IF NOT EXISTS ship_bases_retired ON ship_bases(created_at, id) WHERE retired = 1',
      'CREATE INDEX IF NOT EXISTS checkpoints_ship_base ON checkpoints(shipped_base_id)',
    ],
  },
  {
    version: 33,
    description: "nodes' storage as their heartbeats say (`low`: host disk below its reserve; `read-only`): placement passes such nodes by",
    statements: () => ["ALTER TABLE nodes ADD COLUMN storage TEXT NOT NULL DEFAULT 'ok'"],
  },
];

export const migrationsTable =
  'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)';

/** Applies the migrations `db` has not recorded yet, each in order; the caller holds whatever lock keeps other processes out. */
export async function applyMigrations(db: SqlExecutor, dialect: Dialect): Promise<number[]> {
  await db.run(migrationsTable);
  const applied = new Set((await db.all<{ version: number }>('SELECT version FROM schema_migrations')).map((r) => Number(r.version)));
  const newest = Math.max(0, ...applied);
  const latest = migrations.at(-1)!.version;
  if (newest > latest) throw new Error(`the database's schema is version ${newest}, newer than this SPACE knows (${latest}): upgrade SPACE`);
  const ran: number[] = [];
  for (const migration of migrations) {
    if (applied.has(migration.version)) continue;
    for (const statement of migration.statements(dialect)) await db.run(statement);
    await db.run('INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)', [
      migration.version,
      migration.description,
      new Date().toISOString(),
    ]);
    ran.push(migration.version);
  }
  return ran;
}
