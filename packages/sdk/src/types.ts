// The SDK's public types in one file: what a user of the SDK reads to learn the API's shapes, longer than ~300 lines because the API is.
/** Shapes of the API (docs/api.md). */
export interface SessionData {
  id: string;
  tenantId: string;
  template: string;
  status: 'starting' | 'running' | 'idle' | 'stopped' | 'failed';
  createdAt: string;
  env: Record<string, string>;
  /** `diskGb`: what the session's volume may hold (writes past it fail with "Disk quota exceeded"). */
  resources: { memoryMb: number; cpus: number; pids: number; diskGb?: number };
  metadata: Record<string, string>;
  checkpointIntervalSec: number;
  fullCheckpointIntervalSec: number;
  idleTimeoutSec: number;
  /** What a resume brings back when the newest checkpoint is full and files changed since (docs/api.md). */
  onResume: 'processes' | 'files';
  codeCheckpointDelayMs: number;
  /** When the session is deleted or paused (`onTimeout`); null: it lives until deleted. */
  expiresAt: string | null;
  onTimeout: 'delete' | 'pause';
  /** Commands started in every new sandbox that did not restore the session's processes, restarted when they exit. */
  services: ServiceData[];
  /** The tenant's volumes the session mounts. */
  volumes: VolumeMountData[];
  /** Ports whose preview URLs anyone may open, without a key or token. */
  publicPorts: number[];
  /** Where exec, PTYs and E2B commands run without a cwd: its template's WORKDIR, else /workspace. */
  cwd: string;
  /** The tenant's secrets the sandbox uses: each env var `NAME` holds its placeholder (see `SecretGrant`). */
  secrets: SecretGrant[];
  egress: EgressPolicy;
  sandbox: { id: string; nodeId: string; startedAt: string } | null;
  /** The node that holds the session's volume (and runs its sandbox). */
  nodeId: string | null;
  parentCheckpointId: string | null;
  /** When its newest checkpoint was taken; null: none. */
  lastCheckpointAt: string | null;
  /**
   * `restoredFrom`: the full checkpoint whose memory the sandbox started from (its processes
   * continued). `note`: how the start went where it was not a plain boot: which checkpoint holds the
   * files written after the restored one, or a memory image not restored and why.
   */
  sandboxHistory?: {
    id: string;
    nodeId: string;
    startedAt: string;
    endedAt: string | null;
    endReason: string | null;
    restoredFrom: string | null;
    note: string | null;
  }[];
  checkpoints?: { id: string; kind: string; createdAt: string }[];
}

export interface CreateSessionOptions {
  template?: string;
  env?: Record<string, string>;
  /** `diskGb` unset: the platform's default (`space limits` shows it). */
  resources?: { memoryMb?: number; cpus?: number; pids?: number; diskGb?: number };
  metadata?: Record<string, string>;
  checkpointIntervalSec?: number;
  /** Seconds between automatic full (memory) checkpoints while processes run; 0 turns them off (default 60). */
  fullCheckpointIntervalSec?: number;
  idleTimeoutSec?: number;
  /** `processes` (default): a resume restores the newest full checkpoint; `files`: it boots on the newest files. */
  onResume?: 'processes' | 'files';
  /** After a code cell, how long without calls before a full checkpoint holds the kernels (default 1000; 0: none). */
  codeCheckpointDelayMs?: number;
  /** Seconds from now after which the session is deleted, or paused with `onTimeout: 'pause'`; unset: never. */
  timeoutSec?: number;
  onTimeout?: 'delete' | 'pause';
  /** Servers the session runs: each is started in every new sandbox that did not restore its processes, and restarted when it exits. */
  services?: ServiceData[];
  /** Volumes (made with `space.volumes.create`) to mount; read-write by default, which one session at a time may. The session runs on their node. */
  volumes?: { name: string; path: string; readOnly?: boolean }[];
  /** Ports anyone may reach through preview URLs, without a key or token. */
  publicPorts?: number[];
  /** Secrets (created with `space.secrets.set`) the sandbox may use through the gateway. */
  secrets?: SecretGrant[];
  /** What the sandbox may reach (default allow-all). */
  egress?: Partial<EgressPolicy>;
}

/**
 * A secret a sandbox may use: `'NAME'` puts the tenant's secret NAME's placeholder in env var NAME;
 * `{ name, secret }` puts the secret `secret` under env var `name` (a fork with a read-only token
 * under the name its processes already use).
 */
export type SecretGrant = string | { name: string; secret: string };

/**
 * `allow-all` (public addresses), `deny-all`, or `allow-list` of `domains` (`*.example.com` for
 * names below) and `cidrs`.
 */
export interface EgressPolicy {
  mode: 'allow-all' | 'deny-all' | 'allow-list';
  domains: string[];
  cidrs: string[];
}

/** A secret as the API shows it: never its value. */
export interface SecretData {
  name: string;
  hosts: string[];
  placeholder: string;
  createdAt: string;
  updatedAt: string;
}

/** One request a sandbox sent through the gateway (secret names, never values). */
export interface EgressAuditEntry {
  time: string;
  sandboxId: string;
  scheme: 'http' | 'https';
  host: string;
  method: string;
  path: string;
  status: number;
  decision: 'allowed' | 'denied' | 'failed';
  bytesSent: number;
  bytesReceived: number;
  durationMs: number;
  secrets: string[];
  reason?: string;
}

export interface ExecOptions {
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string;
  /** Kills the command after this long inside the sandbox (default 60 000). */
  commandTimeoutMs?: number;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  signal?: string | null;
  timedOut?: boolean;
  truncated?: boolean;
  durationMs?: number;
}

export type ExecEvent =
  | { type: 'started'; pid: number }
  /**
   * The stream's sandbox died and the session resumed on `sandboxId`, restored from a full
   * checkpoint that held this process: it continues from there. What it printed after that
   * checkpoint (`repeatedBytes`, already delivered) it prints again as it runs again.
   */
  | { type: 'restored'; sandboxId: string; previousSandboxId: string; repeatedBytes: number }
  | { type: 'stdout' | 'stderr'; data: Buffer }
  | { type: 'exit'; exitCode: number; signal: string | null; timedOut?: boolean };

export interface FileEntry {
  path: string;
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  mode: number;
  mtime: string;
  target?: string;
}

/** One version of a path: in one checkpoint of the session (`session.files.history`), with how it changed from the one before. */
export interface PathVersionData {
  checkpointId: string;
  createdAt: string;
  kind: 'fs' | 'full';
  /** `unknown`: the checkpoint's node did not answer. */
  change: 'added' | 'removed' | 'modified' | 'unchanged' | 'absent' | 'unknown';
  type: FileEntry['type'] | null;
  size: number | null;
  mtime: string | null;
  /** A regular file's sha256 (null for others, and for files over 256 MiB). */
  sha256: string | null;
}

/** A path across a session's checkpoints, oldest first. */
export interface PathHistoryData {
  path: string;
  versions: PathVersionData[];
}

/** A path that differs between two checkpoints (`space.checkpoints.diff`). */
export interface DiffEntryData {
  path: string;
  change: 'added' | 'removed' | 'modified' | 'renamed' | 'mode';
  type: FileEntry['type'];
  /** Where a renamed path was. */
  from?: string;
  sizeBefore: number | null;
  sizeAfter: number | null;
}

/** One page of a diff, by path; `next` is the `after` of the next page (null on the last). */
export interface CheckpointDiffData {
  from: string;
  to: string;
  entries: DiffEntryData[];
  next: string | null;
}

/** One file in two checkpoints (`space.checkpoints.diffFile`): sizes and sha256 of both, and a unified diff of text. */
export interface FileDiffData {
  path: string;
  from: string;
  to: string;
  /** null: not a regular file in that checkpoint. */
  sizeBefore: number | null;
  sizeAfter: number | null;
  sha256Before: string | null;
  sha256After: string | null;
  /** Both sides are UTF-8 text of at most 1 MiB. */
  text: boolean;
  /** '' when the same; null when not text or too different to show. */
  unified: string | null;
}

/** What `session.files.restore` did: the checkpoint taken first (restore it to undo) and what it wrote. */
export interface PathRestoreData {
  undoCheckpointId: string;
  path: string;
  files: number;
  directories: number;
  symlinks: number;
  /** FIFOs, sockets and devices: never copied. */
  skipped: string[];
}

/** A port something listens on in a sandbox. */
export interface ListeningPortData {
  port: number;
  address: string;
}

/** A preview URL of a port, with its token. */
export interface PreviewData {
  token: string;
  /** The path form: `/v1/sessions/<id>/ports/<port>/?space_token=…`. */
  url: string;
  /** The port's own host (`<port>-<id>.<SPACE_PREVIEW_DOMAIN>`), when the platform has a preview domain. */
  hostUrl: string | null;
  expiresAt: string;
}

/** A session's service: `port` is where it serves (a preview request waits up to 30 s for it to listen). */
export interface ServiceData {
  name: string;
  cmd: string | string[];
  port?: number;
  cwd?: string;
  env?: Record<string, string>;
}

/** What a running sandbox uses (`session.metrics()`): CPU over a short window, memory of its cgroup, its volume's disk. */
export interface SandboxMetricsData {
  sampledAt: string;
  cpuCount: number;
  /** Percent of `cpuCount` used over the 0.2 s before `sampledAt`. */
  cpuUsedPct: number;
  memoryBytes: number;
  memoryLimitBytes: number | null;
  diskBytes: number | null;
  diskLimitBytes: number | null;
}

export interface CheckpointData {
  id: string;
  sessionId: string;
  kind: 'fs' | 'full';
  /**
   * `auto` ones are pruned; the others are kept until deleted: `manual`; `resume` (the files a resume
   * rolled back); `rescue` (what the session wrote on a node after the checkpoint it moved on from
   * when that node was lost, taken once the node was back).
   */
  trigger: 'manual' | 'auto' | 'resume' | 'rescue';
  createdAt: string;
  /** Bytes of the memory image (full checkpoints), else null. */
  sizeBytes: number | null;
  /** How long the sandbox was paused to take it (full checkpoints), else null. */
  pauseMs: number | null;
  /** When it was stored in the object store, so that any node can restore it; null until then. */
  shippedAt: string | null;
  /** The session's volumes when it was taken; `copied`: the checkpoint holds a copy of its files (read-write ones). */
  volumes: (VolumeMountData & { copied: boolean })[];
}

/** One of the tenant's events (`space.events()`): sessions created, changing status, deleted; checkpoints taken and deleted. */
export type TenantEventData =
  | { type: 'session.created'; sessionId: string; status: SessionData['status']; template: string; parentCheckpointId: string | null }
  | { type: 'session.status'; sessionId: string; status: SessionData['status']; sandboxId: string | null }
  | { type: 'session.deleted'; sessionId: string }
  | { type: 'checkpoint.created'; sessionId: string; checkpointId: string; kind: string }
  | { type: 'checkpoint.deleted'; sessionId: string; checkpointId: string };

/** A volume a session mounts. */
export interface VolumeMountData {
  name: string;
  path: string;
  readOnly: boolean;
}

/** A tenant's volume: a directory with a size of its own that outlives sessions, mounted by them. */
export interface VolumeData {
  name: string;
  sizeGb: number;
  createdAt: string;
  /** The node holding it; sessions mounting it run there. */
  nodeId: string;
  /** Bytes it holds (only from `space.volumes.get`). */
  usedBytes?: number | null;
  fromSnapshot: string | null;
  /** A fork's copy of a read-write volume belongs to the fork and goes with it. */
  ownerSessionId: string | null;
  mounts: { sessionId: string; path: string; readOnly: boolean }[];
}

export interface VolumeSnapshotData {
  id: string;
  volume: string;
  createdAt: string;
}

export interface ProcessData {
  pid: number;
  /** This process apart from any other with its pid (absent from sandboxes restored from older checkpoints). */
  instance?: string;
  cmd: string | string[];
  startedAt: string;
  running: boolean;
  exitCode: number | null;
  pty: boolean;
}

export interface ProcessListData {
  processes: ProcessData[];
  /**
   * Live processes the daemon did not start (`nohup … &`, `setsid`, daemons a command left),
   * besides the sandbox's init and daemon: they count for automatic full checkpoints and idle stops too.
   */
  untracked?: number;
}

export type TenantLimitName = 'sessions' | 'concurrentCreates' | 'requestsPerSec' | 'openRequests' | 'openStreams' | 'checkpointStorageBytes';

/**
 * What the tenant may keep and do, and what it uses now. Past a limit, calls fail with
 * QUOTA_EXCEEDED or TOO_MANY_REQUESTS whose details name the limit and the `setting` that raises it.
 */
export interface TenantLimitsData {
  tenantId: string;
  limits: Partial<Record<TenantLimitName, { max: number; used: number; setting: string }>>;
  defaultDiskGb: number;
}

/** What was used, in billing units (`GET /v1/usage`); GB here is GiB (2^30 bytes). */
export interface UsageFiguresData {
  cpuSeconds: number;
  memoryGbSeconds: number;
  /** Session volumes on nodes. */
  diskGbHours: number;
  /** The tenant's checkpoints' memory images; a row of its own (`sessionId: null`) when grouped by session. */
  checkpointGbHours: number;
  /** The tenant's shipped checkpoints in the object store, on that same row. */
  objectStoreGbHours: number;
  egressBytesOut: number;
  egressBytesIn: number;
  egressRequests: number;
  sandboxSeconds: number;
  checkpoints: number;
}

export type UsageGroupBy = 'tenant' | 'session' | 'day';

export interface UsageRowData extends UsageFiguresData {
  tenantId: string;
  /** Grouped by session; null on the tenant's checkpoint storage row. */
  sessionId?: string | null;
  /** Grouped by day: YYYY-MM-DD (UTC). */
  day?: string;
}

/** Usage over whole UTC hours (`from` rounded down, `to` up), grouped. */
export interface UsageReportData {
  from: string;
  to: string;
  groupBy: UsageGroupBy;
  granularity: 'hour';
  rows: UsageRowData[];
  /** More than 10,000 groups: narrow the period, or group by tenant or day. */
  truncated: boolean;
  totals: UsageFiguresData;
}

export interface UsageOptions {
  /** Default: 24 hours before `to`. */
  from?: string | Date;
  /** Default: now. */
  to?: string | Date;
  /** Default: `day`. */
  groupBy?: UsageGroupBy;
  sessionId?: string;
  /** Another tenant's (admin key). */
  tenant?: string;
}

/** A template: a built-in (`base`, `tiny`) or the tenant's own, made from a checkpoint or session. */
export interface TemplateData {
  name: string;
  /** 0 for built-ins; the tenant's own count up from 1 each time the name is made again. */
  version: number;
  builtIn: boolean;
  source: 'built-in' | 'checkpoint' | 'dockerfile' | 'image';
  fromCheckpoint: string | null;
  createdAt: string | null;
  /** Sessions of the tenant made from it. */
  sessions: number;
  /** Built from a Dockerfile: what its sessions start with (its CMD runs as the service `cmd`). */
  config: TemplateConfigData | null;
}

export interface TemplateConfigData {
  env: Record<string, string>;
  workdir: string;
  user: string;
  cmd: string | string[] | null;
  labels: Record<string, string>;
  expose: number[];
}

/** A Dockerfile build of a template. */
export interface TemplateBuildData {
  id: string;
  name: string;
  status: 'running' | 'succeeded' | 'failed';
  createdAt: string;
  endedAt: string | null;
  /** Why it failed: the step's Dockerfile line and the cause. */
  error: string | null;
  /** The template version it made. */
  version: number | null;
  steps: number;
  cachedSteps: number;
}

/** What `space.templates.build` sends: the Dockerfile and its build context. */
export interface TemplateBuildOptions {
  name: string;
  dockerfile: string;
  /** The build context: path (relative) -> content. */
  files?: Record<string, string | Uint8Array>;
  /** Context paths whose files are executable. */
  executables?: string[];
  buildArgs?: Record<string, string>;
  /** The tenant's secrets RUN steps may use (as placeholders the gateway replaces); never in the template. */
  secrets?: string[];
  resources?: { memoryMb?: number; cpus?: number; pids?: number; diskGb?: number };
  timeoutSec?: number;
}

/** A node of the cluster (`GET /v1/nodes`, admin key). */
export interface NodeData {
  id: string;
  url: string;
  /** `draining`: takes no new sessions; `lost`: no heartbeat for SPACE_NODE_LOST_AFTER_SEC. */
  status: 'ready' | 'draining' | 'lost';
  /** Sessions whose volume is on the node. */
  sessions: number;
  sandboxes: number;
  capacity: { memoryMb: number; cpus: number };
  /** At its last heartbeat: `low` (its host disk below its reserve) and `read-only` nodes get no new sessions. */
  storage: 'ok' | 'low' | 'read-only';
  registeredAt: string;
  lastHeartbeatAt: string;
}

/** A one-time token a new node joins the cluster with (`SPACE_NODE_JOIN_TOKEN`). */
export interface JoinTokenData {
  token: string;
  expiresAt: string;
  /** How many nodes may join with it. */
  uses: number;
}

/** What draining a node did to each of its sessions. */
export interface DrainResultData {
  nodeId: string;
  moved: { sessionId: string; to: string; note: string }[];
  failed: { sessionId: string; code: string; message: string }[];
}
