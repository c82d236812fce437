// The Store contract both engines implement, and the rows it speaks: one interface, longer than ~300 lines because it covers every table.
import type {
  CheckpointKind,
  CheckpointVolume,
  TemplateBuild,
  TemplateConfig,
  EgressAuditEntry,
  EgressPolicy,
  NodeCapacity,
  OnResume,
  OnTimeout,
  Resources,
  SecretGrant,
  Service,
  SessionStatus,
  StoredObject,
  UsageGroupBy,
} from '@space/protocol';
import type { UsageAmounts, UsageBatchFrom, UsageGroupRow } from './usage-records.js';
import type { PoolUse } from './sql-database.js';

/** How many egress audit entries the store keeps per session, of sandboxes that served it on nodes it left (the audit API's largest page). */
export const archivedAuditEntries = 1000;

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
  /** A session token's session: the key acts on that session only (deleted with it). */
  sessionId: string | null;
  /** Narrower still: `port:N`, a preview token for that port of the session. */
  scope: string | null;
  /** After this the key no longer works (preview tokens); null: never. */
  expiresAt: string | null;
}

/**
 * A secret a session may use (env var `name`, the tenant's secret `secret`), with the placeholder
 * its env var holds when that is not the secret's own: a fork that puts another secret under a name
 * its parent had keeps the parent's placeholder, which its processes may already hold.
 */
export interface SessionSecret extends SecretGrant {
  placeholder?: string;
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
  /** The node holding the session's volume (null in stores from before nodes were recorded: the configured node). */
  volumeNodeId: string | null;
  /** When a control plane last served a call of the session (written at most every few seconds): idleness across control planes. */
  lastActiveAt: string | null;
  /** The tenant's secrets the session may use, each under its env var. */
  secrets: SessionSecret[];
  egress: EgressPolicy;
  /** When the maintenance deletes or pauses the session (`onTimeout`); null: never. */
  expiresAt: string | null;
  onTimeout: OnTimeout;
  /** Started in every new sandbox that did not restore the session's processes. */
  services: Service[];
  /** The tenant's volumes the session mounts (claimed in `volume_mounts` too). */
  volumes: SessionVolumeRow[];
  /** Ports whose preview URLs need no key or token. */
  publicPorts: number[];
  /** Where a process started without a cwd runs: the template's WORKDIR; null: the workspace. */
  cwd: string | null;
  /** How long after a code cell a full checkpoint holds the kernels; 0: none. */
  codeCheckpointDelayMs: number;
  /** How many times the session was placed (a sandbox started, a move): the fencing token of its node calls (protocol's placement.ts). */
  placementEpoch: number;
}

/** A volume a session mounts: which, where, how. */
export interface SessionVolumeRow {
  volumeId: string;
  name: string;
  path: string;
  readOnly: boolean;
}

/** A tenant's volume: a btrfs subvolume on one node, held to `sizeGb`. */
export interface VolumeRow {
  id: string;
  tenantId: string;
  name: string;
  nodeId: string;
  sizeGb: number;
  createdAt: string;
  fromSnapshot: string | null;
  /** A fork's copy of a volume: deleted with that session. */
  ownerSessionId: string | null;
}

export interface VolumeSnapshotRow {
  id: string;
  tenantId: string;
  volumeId: string;
  nodeId: string;
  createdAt: string;
}

export interface VolumeMountRow {
  sessionId: string;
  volumeId: string;
  path: string;
  readOnly: boolean;
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
  trigger: 'manual' | 'auto' | 'resume' | 'rescue';
  nodeId: string;
  createdAt: string;
  sizeBytes: number | null;
  pauseMs: number | null;
  /** When it was stored in the object store (null: not yet, or no object store), as a difference to `shippedBaseId`. */
  shippedAt: string | null;
  shippedBaseId: string | null;
  shippedObjects: StoredObject[] | null;
  /** The session's volumes when it was taken; `copied` ones have a copy next to the checkpoint on its node. */
  volumes: (CheckpointVolume & { volumeId: string })[];
}

/**
 * The order rows written together go in: by id, so two control planes' writes lock the rows they
 * share in one order and never wait on each other in a cycle.
 */
export const inIdOrder = (a: { id: string }, b: { id: string }): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * A session's maintenance has nothing to do before `at` (ms since the epoch), as worked out from
 * `basis`, its row as read: not set when the row changed since (any `updateSession` of its status,
 * sandbox, node or timeout makes it due at once, and so does a full checkpoint's insert).
 */
export interface MaintenanceSchedule {
  id: string;
  at: number;
  basis: Pick<SessionRow, 'status' | 'sandboxId' | 'expiresAt'>;
}

/** A checkpoint as first recorded, before it is shipped. */
export type NewCheckpointRow = Omit<CheckpointRow, 'shippedAt' | 'shippedBaseId' | 'shippedObjects'>;

/** A full copy of one of a session's checkpoints in the object store; the session's later checkpoints are stored as differences to it. */
export interface ShipBaseRow {
  id: string;
  sessionId: string;
  object: StoredObject;
  /** Its copies of the session's read-write volumes (each with its `volumeId`), which the checkpoints' copies are differences to. */
  volumeObjects: StoredObject[];
  createdAt: string;
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
/** A session's volume left on a lost node (what it wrote after its newest shipped checkpoint), until it is rescued. */
export interface LeftVolumeRow {
  sessionId: string;
  nodeId: string;
  leftAt: string;
  /** The tenant's volumes the session took along (they live on another node now): their copies on `nodeId` go too. */
  namedVolumeIds: string[];
}

/** What a call made with an idempotency key answered: a retry with that key gets it again. */
export interface IdempotentOutcome {
  status: number;
  /** The JSON it answered with. */
  body: string;
}

/** An idempotency key of a tenant: claimed by a call under way (`outcome` null) or holding its outcome, until `expiresAt` (ms since the epoch). */
export interface IdempotencyKeyRow {
  tenantId: string;
  key: string;
  /** The method and path the key was first used for. */
  operation: string;
  outcome: IdempotentOutcome | null;
  expiresAt: number;
}

export interface SessionLeaseRow {
  sessionId: string;
  /** Names one holding (process and operation), never reused. */
  holder: string;
  operation: string;
  expiresAt: number;
}

export type SessionPatch = Partial<
  Pick<
    SessionRow,
    | 'status'
    | 'sandboxId'
    | 'nodeId'
    | 'sandboxStartedAt'
    | 'resumeNote'
    | 'lastActiveAt'
    | 'volumeNodeId'
    | 'expiresAt'
    | 'onTimeout'
    | 'services'
    | 'volumes'
    | 'publicPorts'
  >
>;

/**
 * A session's recorded sandbox, where it runs, and where its volume is; with when its next
 * maintenance is due (ms since the epoch, null: at once) and its checkpoint intervals.
 */
export interface SandboxClaim extends Pick<SessionRow, 'checkpointIntervalSec' | 'fullCheckpointIntervalSec'> {
  sessionId: string;
  sandboxId: string;
  nodeId: string;
  volumeNodeId: string | null;
  maintainAfter: number | null;
}

/** A node of the cluster, as its newest heartbeat described it. */
export interface NodeRow {
  id: string;
  url: string;
  /** The node API token, sealed with the secrets key (like secret values). */
  token: string;
  /** `draining` takes no new sessions; whether a node is lost follows from `lastHeartbeatAt`. */
  status: 'ready' | 'draining';
  capacity: NodeCapacity;
  /** As its last heartbeat said: `low` (its host disk below its reserve) and `read-only` nodes are not placed on. */
  storage: 'ok' | 'low' | 'read-only';
  sandboxes: number;
  registeredAt: string;
  lastHeartbeatAt: string;
}

/** What a heartbeat writes of its node's row (its status and registration are kept). */
export type HeartbeatRow = Omit<NodeRow, 'status' | 'registeredAt'>;

/** A token that lets nodes join the cluster, `uses` of them at most (stored as its sha256 hash). */
export interface NodeJoinTokenRow {
  hash: string;
  createdAt: string;
  expiresAt: string;
  uses: number;
}

/** What presenting a join token came to: used now, or why not. */
export type JoinTokenUse =
  | { outcome: 'used' }
  | { outcome: 'unknown' }
  | { outcome: 'expired'; expiresAt: string }
  /** Every use it allowed is spent: `usedBy` is the last node that joined with it. */
  | { outcome: 'used-before'; usedBy: string; usedAt: string; uses: number };

/** A node's own credential, issued when it joined (stored as its sha256 hash). */
export interface NodeCredentialRow {
  nodeId: string;
  hash: string;
  createdAt: string;
  revokedAt: string | null;
}

/** A tenant's data key as stored: wrapped by the cluster key (never in the clear). */
export interface DataKeyRow {
  id: string;
  tenantId: string;
  wrapped: string;
  createdAt: string;
}

/** Sessions whose volume is on a node, and how many of them run (or start) now. */
export interface NodeLoad {
  sessions: number;
  active: number;
}

/** One version of a tenant's template: a read-only snapshot of a checkpoint, on the node. */
export interface TemplateRow {
  id: string;
  tenantId: string;
  name: string;
  version: number;
  fromCheckpoint: string;
  /** The node holding the snapshot (null in stores from before nodes were recorded: the configured node). */
  nodeId: string | null;
  createdAt: string;
  /** Built from a Dockerfile: what its sessions start with. */
  config: TemplateConfig | null;
}

/** A Dockerfile build and its log (the newest part, bounded). */
export interface TemplateBuildRow extends TemplateBuild {
  tenantId: string;
  log: string;
  /** The session the build runs its steps in (deleted at its end). */
  sessionId: string | null;
  /** Written every few seconds while the build runs: a build without one for a while lost its control plane. */
  heartbeatAt: string | null;
}

export type TemplateBuildPatch = Partial<
  Pick<TemplateBuildRow, 'status' | 'endedAt' | 'error' | 'version' | 'steps' | 'cachedSteps' | 'log' | 'sessionId' | 'heartbeatAt'>
>;

/** A step a tenant's builds made before: the hidden template holding the files after it. */
export interface BuildCacheRow {
  tenantId: string;
  key: string;
  templateId: string;
  createdAt: string;
}

/**
 * Everything the control plane remembers. One implementation (`SqlStore`) over two engines:
 * SQLite in the data directory for one machine, PostgreSQL (`SPACE_DATABASE_URL`) for control
 * planes that share it. Calls fail with `STORE_UNAVAILABLE` while the database cannot be reached.
 */
export interface Store {
  insertTenant(row: TenantRow): Promise<void>;
  getTenant(id: string): Promise<TenantRow | null>;
  insertApiKey(row: ApiKeyRow): Promise<void>;
  findApiKey(hash: string): Promise<ApiKeyRow | null>;
  /** Makes `row` the only admin key (the configured one replaces any earlier one). */
  replaceAdminKey(row: ApiKeyRow): Promise<void>;
  /** Deletes a session's keys of one scope (revokes a port's preview tokens). */
  deleteScopedKeys(sessionId: string, scope: string): Promise<number>;
  /** With `lease`, the session's first lifecycle lease is written with it, in the same commit. */
  insertSession(row: SessionRow, lease?: SessionLeaseRow): Promise<void>;
  getSession(tenantId: string, id: string): Promise<SessionRow | null>;
  /** `getSession` and the session's lease (null when none is recorded), in one statement: what a call on its sandbox reads. */
  getSessionWithLease(tenantId: string, id: string): Promise<{ row: SessionRow; lease: SessionLeaseRow | null } | null>;
  /** A session whatever its tenant: only for requests that carry no key (a public port's preview URL). */
  findSession(id: string): Promise<SessionRow | null>;
  listSessions(tenantId: string): Promise<SessionRow[]>;
  /**
   * The sessions a maintenance pass has something to do for at `now` (ms since the epoch), whatever
   * their number in all: a start under way, a timeout passed, or a sandbox whose next maintenance
   * (`scheduleMaintenance`) has come. With `nodeIds`, only those on these nodes (their sandbox's,
   * else their volume's) and those on no node.
   */
  listSessionsToMaintain(now: number, nodeIds?: string[]): Promise<SessionRow[]>;
  /**
   * Which sandbox each session with one records, on these nodes (all with none given): what
   * maintenance compares the nodes' lists with, without reading the sessions nothing is due for.
   */
  listSandboxClaims(nodeIds?: string[]): Promise<SandboxClaim[]>;
  /**
   * Each session's maintenance has nothing to do before its `at`, as worked out from its `basis`
   * (`MaintenanceSchedule`); written in one statement, in the order given.
   */
  scheduleMaintenance(schedules: MaintenanceSchedule[]): Promise<void>;
  /** The sessions of these ids that exist (any tenant). */
  findSessions(ids: string[]): Promise<SessionRow[]>;
  /** The sessions whose volume or sandbox is on the node. */
  listSessionsOnNode(nodeId: string): Promise<SessionRow[]>;
  /** How many sessions have each status. */
  countSessionsByStatus(): Promise<Record<string, number>>;
  /** The control plane `id` is alive at `at` (ms since the epoch). */
  heardControlPlane(id: string, at: number): Promise<void>;
  /** The control planes heard since `since`. */
  liveControlPlanes(since: number): Promise<string[]>;
  forgetControlPlane(id: string): Promise<void>;
  forgetControlPlanesBefore(before: number): Promise<void>;
  /** How many sessions the tenant has. */
  countSessions(tenantId: string): Promise<number>;
  updateSession(id: string, patch: SessionPatch): Promise<void>;
  /** Sets `lastActiveAt` of many sessions at once (ms since the epoch, by id); sessions that no longer exist are skipped. */
  recordSessionsUsed(uses: ReadonlyMap<string, number>): Promise<void>;
  /** Places the session anew: its epoch advanced from `from` to `from + 1`; false when another placement came first. */
  advancePlacement(id: string, from: number): Promise<boolean>;
  /** `updateSession`, only while the session is still at placement `epoch`; false when it was placed anew meanwhile. */
  updatePlacedSession(id: string, epoch: number, patch: SessionPatch): Promise<boolean>;
  /** Deletes the session, its sandbox history, its archived egress audit, its session tokens and its volume mounts. */
  deleteSession(id: string): Promise<void>;
  /** Records that the session's volume stayed on a lost node when the session moved off it. */
  recordLeftVolume(left: LeftVolumeRow): Promise<void>;
  /** The volume now lives on `nodeId` (its session moved it there with a checkpoint's copy). */
  moveVolume(volumeId: string, nodeId: string): Promise<void>;
  listLeftVolumes(): Promise<LeftVolumeRow[]>;
  deleteLeftVolume(sessionId: string, nodeId: string): Promise<void>;
  insertCheckpoint(row: NewCheckpointRow): Promise<void>;
  getCheckpoint(tenantId: string, id: string): Promise<CheckpointRow | null>;
  /** Which of these checkpoint ids the store knows. */
  knownCheckpoints(ids: string[]): Promise<Set<string>>;
  listCheckpoints(sessionId: string): Promise<CheckpointRow[]>;
  /**
   * Of each of these sessions, its newest checkpoint of each kind, oldest first: what maintenance
   * looks at to tell which automatic checkpoint comes due when, read for many sessions at once.
   * A session without checkpoints is not in the map.
   */
  listNewestCheckpoints(sessionIds: string[]): Promise<Map<string, CheckpointRow[]>>;
  /** Every checkpoint of the tenant's sessions (one query, for the event stream). */
  listTenantCheckpoints(tenantId: string): Promise<CheckpointRow[]>;
  deleteCheckpoint(id: string): Promise<void>;
  /** The bytes the tenant's checkpoints hold outside the sessions' volumes (their memory images). */
  checkpointBytes(tenantId: string): Promise<number>;
  /** Whether any session was forked from this checkpoint. */
  isForkParent(checkpointId: string): Promise<boolean>;
  /** Sessions forked from any checkpoint of `sessionId`. */
  listChildren(sessionId: string): Promise<SessionRow[]>;
  /**
   * `updatePlacedSession` of the start's session and, when it was still at placement `epoch`, the
   * start in its history (recording the same sandbox again changes nothing), in one transaction;
   * false when it was placed anew meanwhile (nothing written). With `leaseHolder`, the session's
   * lease that holder holds is released in the same transaction (the start ends its operation).
   */
  recordPlacedStart(epoch: number, patch: SessionPatch, start: SandboxHistoryRow, leaseHolder?: string): Promise<boolean>;
  recordSandboxEnd(sandboxId: string, reason: string): Promise<void>;
  /**
   * Corrects how the session's newest sandbox on `nodeId` ended: it was recorded `lost` when the
   * session moved off that node, and the node, heard again, tells when it really stopped.
   */
  correctSandboxEnd(sessionId: string, nodeId: string, end: { endedAt: string; reason: string; note: string }): Promise<void>;
  /**
   * Keeps egress audit entries of the session that a node held (entries already kept are not kept
   * twice); only the newest `archivedAuditEntries` of a session stay.
   */
  archiveEgressAudit(sessionId: string, entries: EgressAuditEntry[]): Promise<void>;
  /** The newest `limit` archived entries of the session, oldest first. */
  listArchivedEgressAudit(sessionId: string, limit: number): Promise<EgressAuditEntry[]>;
  listSandboxHistory(sessionId: string): Promise<SandboxHistoryRow[]>;
  setSessionEgress(id: string, egress: EgressPolicy): Promise<void>;
  /** Writes the session's secrets if they are still `from` (false: they changed since, or the session is gone). */
  setSessionSecrets(id: string, from: SessionSecret[], to: SessionSecret[]): Promise<boolean>;
  /**
   * Claims an idempotency key for a call (outcome null) until `expiresAt`: null when claimed, else
   * the row that holds the key. A row expired by `now` is taken over.
   */
  claimIdempotencyKey(claim: Omit<IdempotencyKeyRow, 'outcome'>, now: number): Promise<IdempotencyKeyRow | null>;
  /** Extends the claim of a call still under way. */
  renewIdempotencyKey(tenantId: string, key: string, expiresAt: number): Promise<void>;
  /** Records the outcome of the call that claimed the key, kept until `expiresAt`. */
  finishIdempotencyKey(tenantId: string, key: string, outcome: IdempotentOutcome, expiresAt: number): Promise<void>;
  /** Drops a claim whose call did not run or whose outcome is not known: a retry with the key runs. */
  releaseIdempotencyKey(tenantId: string, key: string): Promise<void>;
  /** Deletes the keys expired by `now`; how many. */
  deleteExpiredIdempotencyKeys(now: number): Promise<number>;
  /** Takes the session's lease if no one holds it or the holder's has expired by `now`; false if it is held. */
  acquireSessionLease(lease: SessionLeaseRow, now: number): Promise<boolean>;
  /** Extends a lease this holder still holds; false if it lost it (expired and taken). */
  renewSessionLease(sessionId: string, holder: string, expiresAt: number): Promise<boolean>;
  releaseSessionLease(sessionId: string, holder: string): Promise<void>;
  /** Releases every lease whose holder starts with `holderPrefix` (all of them for ''); returns how many. */
  releaseSessionLeasesOf(holderPrefix: string): Promise<number>;
  getSessionLease(sessionId: string): Promise<SessionLeaseRow | null>;
  /** Creates or replaces a tenant's secret (created_at and placeholder of an existing one are kept). */
  putSecret(row: SecretRow): Promise<SecretRow>;
  getSecret(tenantId: string, name: string): Promise<SecretRow | null>;
  listSecrets(tenantId: string): Promise<SecretRow[]>;
  deleteSecret(tenantId: string, name: string): Promise<boolean>;
  /** Adds the next version of the tenant's template `row.name` (1 for a new name); two at once get consecutive versions. */
  insertTemplateVersion(row: Omit<TemplateRow, 'version'>): Promise<TemplateRow>;
  /** The tenant's template versions, by name then version. */
  listTemplates(tenantId: string): Promise<TemplateRow[]>;
  deleteTemplate(id: string): Promise<void>;
  insertBuild(row: TemplateBuildRow): Promise<void>;
  updateBuild(id: string, patch: TemplateBuildPatch): Promise<void>;
  getBuild(tenantId: string, id: string): Promise<TemplateBuildRow | null>;
  /** Builds still running whose heartbeat is older than `before` (their control plane died). */
  listStaleBuilds(before: string): Promise<TemplateBuildRow[]>;
  getBuildCache(tenantId: string, key: string): Promise<BuildCacheRow | null>;
  /** Records a cached step (a key made again points at the newer template). */
  putBuildCache(row: BuildCacheRow): Promise<void>;
  /** The tenant's cached steps, oldest first. */
  listBuildCache(tenantId: string): Promise<BuildCacheRow[]>;
  deleteBuildCache(tenantId: string, key: string): Promise<void>;
  /** Registers each node on its first heartbeat, updates it on the next (its status is kept); one statement, rows of distinct nodes. */
  recordHeartbeats(rows: HeartbeatRow[]): Promise<void>;
  listNodes(): Promise<NodeRow[]>;
  getNode(id: string): Promise<NodeRow | null>;
  setNodeStatus(id: string, status: NodeRow['status']): Promise<void>;
  insertNodeJoinToken(row: NodeJoinTokenRow): Promise<void>;
  /** Uses a join token for `nodeId`, once, unless it expired by `at`. */
  useNodeJoinToken(hash: string, nodeId: string, at: string): Promise<JoinTokenUse>;
  /** Records the node's credential, in place of any it had (a node joined again). */
  putNodeCredential(row: Omit<NodeCredentialRow, 'revokedAt'>): Promise<void>;
  findNodeCredential(hash: string): Promise<NodeCredentialRow | null>;
  /** Revokes the node's credential; false when it had none (or it was revoked already). */
  revokeNodeCredential(nodeId: string, at: string): Promise<boolean>;
  /** Adds the tenant's data key; false when it has one already (another control plane made it first). */
  insertDataKey(row: DataKeyRow): Promise<boolean>;
  tenantDataKey(tenantId: string): Promise<DataKeyRow | null>;
  /** Records `nodeId` as the node of sessions and templates from before nodes were recorded (they are on the configured node). */
  adoptUnplaced(nodeId: string): Promise<void>;
  /** Records the checkpoint as shipped by `holder`; false when it is gone or `holder` no longer holds its shipment's claim. */
  markShipped(checkpointId: string, holder: string, shipped: { at: string; baseId: string; objects: StoredObject[] }): Promise<boolean>;
  /** Checkpoints not in the object store yet, oldest first. */
  listUnshipped(): Promise<CheckpointRow[]>;
  /**
   * Claims the shipment of an unshipped checkpoint for `holder` until `until` (ms since the epoch):
   * false when it is shipped, gone, or another holder's claim lasts past `now`. The holder renews it
   * by claiming again.
   */
  claimShipment(checkpointId: string, holder: string, until: number, now: number): Promise<boolean>;
  releaseShipment(checkpointId: string, holder: string): Promise<void>;
  /** Unshipped checkpoints whose claim expired by `now`: their control plane died (or stalled) while shipping them. */
  listAbandonedShipments(now: number): Promise<CheckpointRow[]>;
  insertShipBase(row: ShipBaseRow): Promise<void>;
  getShipBase(id: string): Promise<ShipBaseRow | null>;
  /** The session's newest base, which its next checkpoints are stored against. */
  newestShipBase(sessionId: string): Promise<ShipBaseRow | null>;
  /** Bases no checkpoint is stored against that are not their session's newest (or whose session is gone). */
  unusedShipBases(): Promise<ShipBaseRow[]>;
  deleteShipBase(id: string): Promise<void>;
  /** Adds the volume; false when the tenant has one of that name already. */
  insertVolume(row: VolumeRow): Promise<boolean>;
  getVolume(tenantId: string, name: string): Promise<VolumeRow | null>;
  findVolume(id: string): Promise<VolumeRow | null>;
  listVolumes(tenantId: string): Promise<VolumeRow[]>;
  /** Volumes that belong to a session (a fork's copies). */
  listOwnedVolumes(sessionId: string): Promise<VolumeRow[]>;
  /** Deletes the volume and the records of its snapshots. */
  deleteVolume(id: string): Promise<void>;
  insertVolumeSnapshot(row: VolumeSnapshotRow): Promise<void>;
  getVolumeSnapshot(tenantId: string, id: string): Promise<VolumeSnapshotRow | null>;
  listVolumeSnapshots(volumeId: string): Promise<VolumeSnapshotRow[]>;
  deleteVolumeSnapshot(id: string): Promise<void>;
  /** Records the session's mounts, all or none: null when done, else the id of a volume another session mounts read-write already. */
  claimVolumeMounts(mounts: VolumeMountRow[]): Promise<string | null>;
  /** The sessions mounting a volume. */
  listVolumeMounts(volumeId: string): Promise<VolumeMountRow[]>;
  /** Per node id: the sessions whose volume is there. */
  loadByNode(): Promise<Map<string, NodeLoad>>;
  /** Per node id: the sessions running or starting there (what placement weighs; read by the status index, not a count of every session). */
  activeByNode(): Promise<Map<string, number>>;
  /** Stores nodes' usage batches, each once, in one transaction (usage-records.ts): for each, false when it was stored before. */
  applyUsageBatches(items: UsageBatchFrom[]): Promise<boolean[]>;
  /** Adds the tenants' checkpoint storage since the last time any control plane did (at most every `everyMs`); false when not due or done by another. */
  integrateCheckpointStorage(now: number, everyMs: number): Promise<boolean>;
  /** Sums of usage in whole hours, grouped (usage-records.ts `usageGroups`). */
  usageGroups(query: UsageGroupQuery): Promise<UsageGroupRow[]>;
  /** Every tenant's usage since metering began. */
  usageTotals(): Promise<Map<string, UsageAmounts>>;
  /** Runs `work` with its statements on the background pool (maintenance's: see `SqlDatabase.background`). */
  background<T>(work: () => Promise<T>): Promise<T>;
  /** The database's connections now (`/metrics`); null for SQLite, which has none to wait for. */
  connections(): PoolUse | null;
  close(): Promise<void>;
}

export interface UsageGroupQuery {
  tenantId: string | null;
  sessionId: string | null;
  /** `YYYY-MM-DDTHH` (UTC), included. */
  fromHour: string;
  /** Excluded. */
  toHour: string;
  groupBy: UsageGroupBy;
  limit: number;
}
