// One mapping per table from the engines' rows to the store's: a list of small functions, kept together so the column names are read in one place.
import type { StoredObject } from '@space/protocol';
import type {
  ApiKeyRow,
  CheckpointRow,
  NodeRow,
  SandboxHistoryRow,
  SecretRow,
  SessionRow,
  SessionSecret,
  ShipBaseRow,
  TemplateRow,
  TemplateBuildRow,
  VolumeMountRow,
  VolumeRow,
  VolumeSnapshotRow,
} from './store.js';

// Rows as both engines return them (snake_case, JSON in TEXT columns), and their conversion to the store's rows.

export interface SessionDbRow {
  id: string;
  tenant_id: string;
  template: string;
  status: string;
  created_at: string;
  env: string;
  resources: string;
  metadata: string;
  sandbox_id: string | null;
  node_id: string | null;
  sandbox_started_at: string | null;
  parent_checkpoint_id: string | null;
  checkpoint_interval_sec: number;
  full_checkpoint_interval_sec: number;
  idle_timeout_sec: number;
  on_resume: string;
  resume_note: string | null;
  last_active_at: string | null;
  volume_node_id: string | null;
  secrets: string;
  egress: string;
  expires_at: string | null;
  on_timeout: string;
  services: string;
  volumes: string;
  public_ports: string;
  cwd: string | null;
  code_checkpoint_delay_ms: number;
  placement_epoch: number | string;
}

export interface SecretDbRow {
  tenant_id: string;
  name: string;
  value: string;
  hosts: string;
  placeholder: string;
  created_at: string;
  updated_at: string;
}

export interface CheckpointDbRow {
  id: string;
  session_id: string;
  tenant_id: string;
  kind: string;
  trigger: string;
  node_id: string;
  created_at: string;
  size_bytes: number | null;
  pause_ms: number | null;
  shipped_at: string | null;
  shipped_base_id: string | null;
  shipped_objects: string | null;
  volumes: string;
}

export interface KeyDbRow {
  id: string;
  tenant_id: string;
  hash: string;
  admin: number;
  created_at: string;
  session_id: string | null;
  scope: string | null;
  expires_at: string | null;
}

export interface HistoryDbRow {
  id: string;
  session_id: string;
  node_id: string;
  started_at: string;
  ended_at: string | null;
  end_reason: string | null;
  restored_from: string | null;
  note: string | null;
}

export function toKey(row: KeyDbRow): ApiKeyRow {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    hash: row.hash,
    admin: row.admin === 1,
    createdAt: row.created_at,
    sessionId: row.session_id,
    scope: row.scope,
    expiresAt: row.expires_at,
  };
}

export function toHistory(row: HistoryDbRow): SandboxHistoryRow {
  return {
    id: row.id,
    sessionId: row.session_id,
    nodeId: row.node_id,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    endReason: row.end_reason,
    restoredFrom: row.restored_from,
    note: row.note,
  };
}

export function toSession(row: SessionDbRow): SessionRow {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    template: row.template,
    status: row.status as SessionRow['status'],
    createdAt: row.created_at,
    env: JSON.parse(row.env) as Record<string, string>,
    resources: JSON.parse(row.resources) as SessionRow['resources'],
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    sandboxId: row.sandbox_id,
    nodeId: row.node_id,
    sandboxStartedAt: row.sandbox_started_at,
    parentCheckpointId: row.parent_checkpoint_id,
    checkpointIntervalSec: row.checkpoint_interval_sec,
    fullCheckpointIntervalSec: row.full_checkpoint_interval_sec,
    idleTimeoutSec: row.idle_timeout_sec,
    onResume: row.on_resume as SessionRow['onResume'],
    resumeNote: row.resume_note,
    lastActiveAt: row.last_active_at,
    volumeNodeId: row.volume_node_id,
    secrets: secretsFromDb(row.secrets),
    egress: JSON.parse(row.egress) as SessionRow['egress'],
    expiresAt: row.expires_at,
    onTimeout: row.on_timeout as SessionRow['onTimeout'],
    services: JSON.parse(row.services) as SessionRow['services'],
    volumes: JSON.parse(row.volumes) as SessionRow['volumes'],
    publicPorts: JSON.parse(row.public_ports) as number[],
    cwd: row.cwd,
    codeCheckpointDelayMs: Number(row.code_checkpoint_delay_ms),
    // BIGINT: PostgreSQL's driver gives it as a string.
    placementEpoch: Number(row.placement_epoch),
  };
}

export function toSecret(row: SecretDbRow): SecretRow {
  return {
    tenantId: row.tenant_id,
    name: row.name,
    value: row.value,
    hosts: JSON.parse(row.hosts) as string[],
    placeholder: row.placeholder,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toCheckpoint(row: CheckpointDbRow): CheckpointRow {
  return {
    id: row.id,
    sessionId: row.session_id,
    tenantId: row.tenant_id,
    kind: row.kind as CheckpointRow['kind'],
    trigger: row.trigger as CheckpointRow['trigger'],
    nodeId: row.node_id,
    createdAt: row.created_at,
    sizeBytes: row.size_bytes,
    pauseMs: row.pause_ms,
    shippedAt: row.shipped_at,
    shippedBaseId: row.shipped_base_id,
    shippedObjects: row.shipped_objects ? (JSON.parse(row.shipped_objects) as StoredObject[]) : null,
    volumes: JSON.parse(row.volumes) as CheckpointRow['volumes'],
  };
}

export interface TemplateDbRow {
  id: string;
  tenant_id: string;
  name: string;
  version: number;
  from_checkpoint: string;
  node_id: string | null;
  created_at: string;
  config: string | null;
}

export function toTemplate(row: TemplateDbRow): TemplateRow {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    version: row.version,
    fromCheckpoint: row.from_checkpoint,
    nodeId: row.node_id,
    createdAt: row.created_at,
    config: row.config ? (JSON.parse(row.config) as TemplateRow['config']) : null,
  };
}

export interface TemplateBuildDbRow {
  id: string;
  tenant_id: string;
  name: string;
  status: string;
  created_at: string;
  ended_at: string | null;
  error: string | null;
  version: number | null;
  steps: number;
  cached_steps: number;
  log: string;
  session_id: string | null;
  heartbeat_at: string | null;
}

export function toBuild(row: TemplateBuildDbRow): TemplateBuildRow {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    status: row.status as TemplateBuildRow['status'],
    createdAt: row.created_at,
    endedAt: row.ended_at,
    error: row.error,
    version: row.version === null ? null : Number(row.version),
    steps: Number(row.steps),
    cachedSteps: Number(row.cached_steps),
    log: row.log,
    sessionId: row.session_id,
    heartbeatAt: row.heartbeat_at,
  };
}

export interface NodeDbRow {
  id: string;
  url: string;
  token: string;
  status: string;
  capacity: string;
  storage: string;
  sandboxes: number;
  registered_at: string;
  last_heartbeat_at: string;
}

export function toNode(row: NodeDbRow): NodeRow {
  return {
    id: row.id,
    url: row.url,
    token: row.token,
    status: row.status as NodeRow['status'],
    capacity: JSON.parse(row.capacity) as NodeRow['capacity'],
    storage: row.storage as NodeRow['storage'],
    sandboxes: row.sandboxes,
    registeredAt: row.registered_at,
    lastHeartbeatAt: row.last_heartbeat_at,
  };
}

export interface ShipBaseDbRow {
  id: string;
  session_id: string;
  object: string;
  volume_objects: string;
  created_at: string;
}

export function toShipBase(row: ShipBaseDbRow): ShipBaseRow {
  return {
    id: row.id,
    sessionId: row.session_id,
    object: JSON.parse(row.object) as StoredObject,
    volumeObjects: JSON.parse(row.volume_objects) as StoredObject[],
    createdAt: row.created_at,
  };
}

export interface VolumeDbRow {
  id: string;
  tenant_id: string;
  name: string;
  node_id: string;
  size_gb: number;
  created_at: string;
  from_snapshot: string | null;
  owner_session_id: string | null;
}

export function toVolume(row: VolumeDbRow): VolumeRow {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    nodeId: row.node_id,
    sizeGb: Number(row.size_gb),
    createdAt: row.created_at,
    fromSnapshot: row.from_snapshot,
    ownerSessionId: row.owner_session_id,
  };
}

export interface VolumeSnapshotDbRow {
  id: string;
  tenant_id: string;
  volume_id: string;
  node_id: string;
  created_at: string;
}

export function toVolumeSnapshot(row: VolumeSnapshotDbRow): VolumeSnapshotRow {
  return { id: row.id, tenantId: row.tenant_id, volumeId: row.volume_id, nodeId: row.node_id, createdAt: row.created_at };
}

export interface VolumeMountDbRow {
  session_id: string;
  volume_id: string;
  path: string;
  read_only: number;
}

export function toVolumeMount(row: VolumeMountDbRow): VolumeMountRow {
  return { sessionId: row.session_id, volumeId: row.volume_id, path: row.path, readOnly: Number(row.read_only) === 1 };
}

/** A session's secrets as stored: a plain name for a secret under its own name (as before grants), else the object. */
export function secretsToDb(secrets: SessionSecret[]): string {
  return JSON.stringify(secrets.map((s) => (s.name === s.secret && !s.placeholder ? s.name : s)));
}

function secretsFromDb(json: string): SessionSecret[] {
  return (JSON.parse(json) as (string | SessionSecret)[]).map((s) => (typeof s === 'string' ? { name: s, secret: s } : s));
}
