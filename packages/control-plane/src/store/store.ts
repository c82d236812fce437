import type { CheckpointKind, EgressPolicy, OnResume, Resources, SessionStatus } from '@space/protocol';

export interface TenantRow {
  id: string;
  name: string;
  createdAt: string;
}

export interface ApiKeyRow {
  id: string;
  tenantId: string;
  /** sha256 of the key; the key itself is never stored. */
  hash: string;
  admin: boolean;
  createdAt: string;
}

export interface SessionRow {
  id: string;
  tenantId: string;
  template: string;
  status: SessionStatus;
  createdAt: string;
  env: Record<string, string>;
  resources: Resources;
  metadata: Record<string, string>;
  sandboxId: string | null;
  nodeId: string | null;
  sandboxStartedAt: string | null;
  /** The checkpoint this session was forked from, if any. */
  parentCheckpointId: string | null;
  checkpointIntervalSec: number;
  fullCheckpointIntervalSec: number;
  idleTimeoutSec: number;
  onResume: OnResume;
  /**
   * What a resume did to the volume (went back to a full checkpoint, and where the newer files are),
   * kept from before the volume changes until the sandbox history records it: a crash in between
   * does not lose the account of it.
   */
  resumeNote: string | null;
  /** Names of the tenant's secrets the session may use. */
  secrets: string[];
  egress: EgressPolicy;
}

export interface SecretRow {
  tenantId: string;
  name: string;
  value: string;
  hosts: string[];
  /** Stays the same when the value changes, so running sandboxes keep working after a rotation. */
  placeholder: string;
  createdAt: string;
  updatedAt: string;
}

export interface CheckpointRow {
  id: string;
  sessionId: string;
  tenantId: string;
  kind: CheckpointKind;
  trigger: 'manual' | 'auto' | 'resume';
  nodeId: string;
  createdAt: string;
  sizeBytes: number | null;
  pauseMs: number | null;
}

/** One sandbox that served a session, for the session's history. */
export interface SandboxHistoryRow {
  id: string;
  sessionId: string;
  nodeId: string;
  startedAt: string;
  endedAt: string | null;
  endReason: string | null;
  restoredFrom: string | null;
  /** What the start could not do as asked (a memory image not restored, and why). */
  note: string | null;
}

/**
 * The right to run one lifecycle operation (restore, delete, checkpoint, ...) on a session: held by
 * one control-plane process at a time, until `expiresAt` (ms since the epoch) unless renewed.
 */
export interface SessionLeaseRow {
  sessionId: string;
  /** Names one holding (process and operation), never reused. */
  holder: string;
  operation: string;
  expiresAt: number;
}

export type SessionPatch = Partial<Pick<SessionRow, 'status' | 'sandboxId' | 'nodeId' | 'sandboxStartedAt' | 'resumeNote'>>;

/**
 * Everything the control plane remembers. SQLite implements it for one machine; a PostgreSQL
 * implementation lets several control-plane replicas share it.
 */
/** One version of a tenant's template: a read-only snapshot of a checkpoint, on the node. */
export interface TemplateRow {
  id: string;
  tenantId: string;
  name: string;
  version: number;
  fromCheckpoint: string;
  createdAt: string;
}

export interface Store {
  insertTenant(row: TenantRow): void;
  getTenant(id: string): TenantRow | null;
  insertApiKey(row: ApiKeyRow): void;
  findApiKey(hash: string): ApiKeyRow | null;
  /** Makes `row` the only admin key (the configured one replaces any earlier one). */
  replaceAdminKey(row: ApiKeyRow): void;
  insertSession(row: SessionRow): void;
  getSession(tenantId: string, id: string): SessionRow | null;
  listSessions(tenantId: string): SessionRow[];
  listAllSessions(): SessionRow[];
  /** How many sessions the tenant has. */
  countSessions(tenantId: string): number;
  updateSession(id: string, patch: SessionPatch): void;
  deleteSession(id: string): void;
  insertCheckpoint(row: CheckpointRow): void;
  getCheckpoint(tenantId: string, id: string): CheckpointRow | null;
  checkpointExists(id: string): boolean;
  listCheckpoints(sessionId: string): CheckpointRow[];
  deleteCheckpoint(id: string): void;
  /** The bytes the tenant's checkpoints hold outside the sessions' volumes (their memory images). */
  checkpointBytes(tenantId: string): number;
  /** Whether any session was forked from this checkpoint. */
  isForkParent(checkpointId: string): boolean;
  /** Sessions forked from any checkpoint of `sessionId`. */
  listChildren(sessionId: string): SessionRow[];
  recordSandboxStart(row: SandboxHistoryRow): void;
  recordSandboxEnd(sandboxId: string, reason: string): void;
  listSandboxHistory(sessionId: string): SandboxHistoryRow[];
  setSessionEgress(id: string, egress: EgressPolicy): void;
  /** Creates or replaces a tenant's secret (created_at and placeholder of an existing one are kept). */
  /** Takes the session's lease if no one holds it or the holder's has expired by `now`; false if it is held. */
  acquireSessionLease(lease: SessionLeaseRow, now: number): boolean;
  /** Extends a lease this holder still holds; false if it lost it (expired and taken). */
  renewSessionLease(sessionId: string, holder: string, expiresAt: number): boolean;
  releaseSessionLease(sessionId: string, holder: string): void;
  getSessionLease(sessionId: string): SessionLeaseRow | null;
  putSecret(row: SecretRow): SecretRow;
  getSecret(tenantId: string, name: string): SecretRow | null;
  listSecrets(tenantId: string): SecretRow[];
  deleteSecret(tenantId: string, name: string): boolean;
  insertTemplate(row: TemplateRow): void;
  /** The tenant's template versions, by name then version. */
  listTemplates(tenantId: string): TemplateRow[];
  deleteTemplate(id: string): void;
  close(): void;
}
