// The public API's route table, one entry per operation (the reference is generated from it): a table read whole, longer than ~300 lines because the API is.
import { z } from 'zod';
import {
  CheckpointListSchema,
  CheckpointSchema,
  CreateCheckpointRequestSchema,
  ForkRequestSchema,
  PauseResultSchema,
  RestoreRequestSchema,
} from './checkpoints.js';
import {
  CheckpointDiffQuerySchema,
  CheckpointDiffSchema,
  FileDiffQuerySchema,
  FileDiffSchema,
  PathHistorySchema,
  PathRestoreRequestSchema,
  PathRestoreResultSchema,
} from './checkpoint-files.js';
import { OkSchema as ok } from './common.js';
import { DesktopStreamRequestSchema, DesktopStreamSchema } from './desktop.js';
import { FileListSchema, FileStatSchema, PathQuerySchema } from './files.js';
import { sandboxRoutes } from './sandbox-routes.js';
import {
  CreateSessionRequestSchema,
  ServiceSpecSchema,
  SessionListSchema,
  SessionSchema,
  SessionTokenSchema,
  SetTimeoutRequestSchema,
  TenantEventSchema,
} from './sessions.js';
import { EgressAuditListSchema, EgressAuditQuerySchema, EgressPolicySchema, PutSecretRequestSchema, SecretListSchema, SecretSchema } from './egress.js';
import {
  BuildLogQuerySchema,
  CreateTemplateRequestSchema,
  DeleteTemplateQuerySchema,
  TemplateBuildSchema,
  TemplateListSchema,
  TemplateSchema,
} from './templates.js';
import { SandboxMetricsSchema } from './node-api.js';

import { CreateVolumeRequestSchema, VolumeListSchema, VolumeSchema, VolumeSnapshotListSchema, VolumeSnapshotSchema } from './volumes.js';
import { CreatePreviewTokenRequestSchema, ListeningPortsSchema, PreviewTokenSchema } from './ports.js';
import {
  CreateJoinTokenRequestSchema,
  DrainResultSchema,
  JoinTokenSchema,
  MetricsHistorySchema,
  NodeHeartbeatReplySchema,
  NodeHeartbeatSchema,
  NodeJoinReplySchema,
  NodeCertificateRequestSchema,
  NodeCertificateReplySchema,
  NodeJoinRequestSchema,
  NodeListSchema,
  NodeViewSchema,
  RevokedCredentialSchema,
} from './nodes.js';
import { UsageQuerySchema, UsageReportSchema } from './usage.js';
import { CreateKeyRequestSchema, CreateTenantRequestSchema, CreatedKeySchema, TenantLimitsSchema, TenantSchema } from './tenants.js';

/** One operation of the public API, for its reference (docs/api-reference.md is generated from these). */
export interface PublicRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  summary: string;
  /** `websocket` for streams; `binary` for raw bytes (file upload and download); `ndjson`: a stream of JSON lines, each one of `response`. */
  transport?: 'websocket' | 'binary' | 'ndjson';
  body?: z.ZodTypeAny;
  query?: z.ZodTypeAny;
  status?: number;
  response?: z.ZodTypeAny;
  /** Served without a key (health and aggregate metrics, for load balancers and Prometheus). */
  withoutKey?: true;
  /** Takes an `Idempotency-Key`: a retry with the same key gets the first call's outcome instead of running again. */
  idempotent?: true;
}

const serviceRoutes: PublicRoute[] = [
  { method: 'GET', path: '/healthz', summary: 'Whether this control plane serves.', response: ok, withoutKey: true },
  {
    method: 'GET',
    path: '/metrics',
    summary:
      "Aggregate numbers of this control plane and the cluster, in Prometheus text format (no ids); with the admin key as bearer credentials, also each tenant's usage (`space_tenant_*_total{tenant=…}`).",
    withoutKey: true,
  },
  {
    method: 'GET',
    path: '/v1/metrics/history',
    summary: "The same numbers sampled every minute for the last hour, kept in this control plane's memory (the console's charts).",
    response: MetricsHistorySchema,
    withoutKey: true,
  },
];

const sessionRoutes: PublicRoute[] = [
  {
    method: 'POST',
    path: '/v1/sessions',
    idempotent: true,
    summary: 'Create a session and start its sandbox (from the warm pool when one fits).',
    body: CreateSessionRequestSchema,
    status: 201,
    response: SessionSchema,
  },
  { method: 'GET', path: '/v1/sessions', summary: "List the tenant's sessions.", response: SessionListSchema },
  {
    method: 'GET',
    path: '/v1/events',
    summary:
      "The tenant's events as server-sent events (`event:` the type, `data:` JSON): sessions created (forks with their checkpoint), changing status or sandbox, deleted; checkpoints taken and deleted. Seen from the store: what any control plane did, within a second.",
    transport: 'binary',
    response: TenantEventSchema,
  },
  { method: 'GET', path: '/v1/sessions/:sessionId', summary: 'One session, with its sandbox history and checkpoints.', response: SessionSchema },
  { method: 'DELETE', path: '/v1/sessions/:sessionId', summary: 'Delete a session: its sandbox, volume and checkpoints.', response: ok, idempotent: true },
  {
    method: 'POST',
    path: '/v1/sessions/:sessionId/sandbox/kill',
    summary: 'Kill only the sandbox; the next call resumes the session.',
    response: ok,
    idempotent: true,
  },
  {
    method: 'PUT',
    path: '/v1/sessions/:sessionId/services/:name',
    summary:
      'Declare (or replace) a service: started in every new sandbox that did not restore the processes, restarted when it exits; started now in a running sandbox.',
    body: ServiceSpecSchema,
    response: SessionSchema,
  },
  {
    method: 'DELETE',
    path: '/v1/sessions/:sessionId/services/:name',
    summary: 'Remove a service; it is stopped in a running sandbox.',
    response: SessionSchema,
  },
  {
    method: 'GET',
    path: '/v1/sessions/:sessionId/ports',
    summary: "The TCP ports something listens on in the sandbox (the agent's own left out); resumes the session.",
    response: ListeningPortsSchema,
  },
  {
    method: 'GET',
    path: '/v1/sessions/:sessionId/ports/:port/*',
    summary:
      'Preview URL: any method (and WebSocket upgrades) under it reaches the port in the sandbox, which is resumed first if it has none; an API key or a preview token (`?space_token=`, then a cookie). 502 PORT_NOT_LISTENING after 3 s without a listener.',
  },
  {
    method: 'PUT',
    path: '/v1/sessions/:sessionId/public-ports/:port',
    summary: "Make a port public: its preview URLs work for anyone, without a key or token (an Authorization header that is not SPACE's reaches the app).",
    response: SessionSchema,
  },
  {
    method: 'DELETE',
    path: '/v1/sessions/:sessionId/public-ports/:port',
    summary: 'Make a port private again: its preview URLs need a key or a preview token.',
    response: SessionSchema,
  },
  {
    method: 'POST',
    path: '/v1/sessions/:sessionId/preview-tokens/:port',
    summary: 'A preview token for one port: its URL works without a key until `expiresAt`.',
    body: CreatePreviewTokenRequestSchema,
    status: 201,
    response: PreviewTokenSchema,
  },
  {
    method: 'POST',
    path: '/v1/sessions/:sessionId/desktop/stream',
    summary: "A live view of the session's desktop for people: noVNC through a preview URL with its token (view-only unless `viewOnly: false`).",
    body: DesktopStreamRequestSchema,
    status: 201,
    response: DesktopStreamSchema,
  },
  {
    method: 'DELETE',
    path: '/v1/sessions/:sessionId/preview-tokens/:port',
    summary: 'Revoke every preview token of the port.',
    response: z.object({ revoked: z.number().int() }).strict(),
  },
  {
    method: 'GET',
    path: '/v1/sessions/:sessionId/metrics',
    summary:
      "What the session's sandbox uses now: CPU over 0.2 s, memory (its cgroup), disk (its volume). 409 SESSION_NOT_RUNNING without a sandbox (not resumed for it).",
    response: SandboxMetricsSchema,
  },
  {
    method: 'POST',
    path: '/v1/sessions/:sessionId/pause',
    idempotent: true,
    summary:
      'Checkpoint (full where allowed, else fs) and stop the sandbox; the next call resumes the session. 409 SESSION_NOT_RUNNING when it has no sandbox.',
    response: PauseResultSchema,
  },
  {
    method: 'POST',
    path: '/v1/sessions/:sessionId/timeout',
    summary: 'Set when the session is deleted or paused, counted from now (0: never).',
    body: SetTimeoutRequestSchema,
    response: SessionSchema,
  },
  {
    method: 'POST',
    path: '/v1/sessions/:sessionId/tokens',
    summary: "A token for this session only: its sandbox operations and reading it (not with another session's token).",
    status: 201,
    response: SessionTokenSchema,
  },
  {
    method: 'POST',
    path: '/v1/sessions/:sessionId/checkpoints',
    idempotent: true,
    summary: 'Take a checkpoint (fs, or full with memory and processes).',
    body: CreateCheckpointRequestSchema,
    status: 201,
    response: CheckpointSchema,
  },
  { method: 'GET', path: '/v1/sessions/:sessionId/checkpoints', summary: "The session's checkpoints, oldest first.", response: CheckpointListSchema },
  {
    method: 'POST',
    path: '/v1/checkpoints/:checkpointId/fork',
    idempotent: true,
    summary: 'New sessions from a checkpoint (all or nothing).',
    body: ForkRequestSchema,
    status: 201,
    response: z.object({ sessions: z.array(SessionSchema) }).strict(),
  },
  {
    method: 'POST',
    path: '/v1/sessions/:sessionId/restore',
    idempotent: true,
    summary:
      "Reset the session to a checkpoint of its lineage; its volumes keep their files unless `restoreVolumes` (then the read-write ones go back to the checkpoint's copies).",
    body: RestoreRequestSchema,
    response: SessionSchema,
  },
];

const checkpointFileRoutes: PublicRoute[] = [
  {
    method: 'GET',
    path: '/v1/checkpoints/:checkpointId/files',
    summary:
      "A file as it was in a checkpoint, as bytes, without starting a sandbox (symlinks resolve inside the checkpoint; a relative path from the session's working directory).",
    transport: 'binary',
    query: PathQuerySchema,
  },
  {
    method: 'GET',
    path: '/v1/checkpoints/:checkpointId/files/list',
    summary: "A directory's entries as they were in a checkpoint (the session's files API's shape).",
    query: PathQuerySchema,
    response: FileListSchema,
  },
  {
    method: 'GET',
    path: '/v1/checkpoints/:checkpointId/files/stat',
    summary: 'A path as it was in a checkpoint: type, size, mode, time (a symlink described, not followed).',
    query: PathQuerySchema,
    response: FileStatSchema,
  },
  {
    method: 'GET',
    path: '/v1/checkpoints/:checkpointId/diff',
    summary:
      "What differs from this checkpoint to `to` (one lineage: its session and its forks), from btrfs's own change tracking: `{path, change: added|removed|modified|renamed|mode, type, from?, sizeBefore, sizeAfter}` by path, in pages (`after`, `limit`, `next`).",
    query: CheckpointDiffQuerySchema,
    response: CheckpointDiffSchema,
  },
  {
    method: 'GET',
    path: '/v1/checkpoints/:checkpointId/diff/file',
    summary:
      'One file in this checkpoint and in `to` (one lineage): sizes and sha256 of both, and a unified diff when both are UTF-8 text of at most 1 MiB (`unified: null` otherwise, or past 1,000 changed lines).',
    query: FileDiffQuerySchema,
    response: FileDiffSchema,
  },
  {
    method: 'POST',
    path: '/v1/sessions/:sessionId/files/restore',
    idempotent: true,
    summary:
      "Put one file or directory as it was in a checkpoint of the session's lineage back into the live session (at `to`, else the same path): an fs checkpoint of the session is taken first (`undoCheckpointId`), each file written atomically while processes run.",
    body: PathRestoreRequestSchema,
    response: PathRestoreResultSchema,
  },
  {
    method: 'GET',
    path: '/v1/sessions/:sessionId/files/history',
    summary:
      "A path in each of the session's checkpoints, oldest first: size, time, sha256 and how it changed from the one before (`added`, `modified`, `removed`, `unchanged`, `absent`, `unknown`).",
    query: PathQuerySchema,
    response: PathHistorySchema,
  },
];

const volumeRoutes: PublicRoute[] = [
  {
    method: 'POST',
    path: '/v1/volumes',
    idempotent: true,
    summary: 'Create a volume (empty, or a copy of one of its snapshots), held to `sizeGb`; sessions mount it with `volumes` at create. It outlives them.',
    body: CreateVolumeRequestSchema,
    status: 201,
    response: VolumeSchema,
  },
  { method: 'GET', path: '/v1/volumes', summary: "The tenant's volumes and the sessions mounting each.", response: VolumeListSchema },
  { method: 'GET', path: '/v1/volumes/:name', summary: 'One volume, with the bytes it holds now.', response: VolumeSchema },
  {
    method: 'DELETE',
    path: '/v1/volumes/:name',
    summary: 'Delete a volume and its snapshots; 409 VOLUME_IN_USE while sessions mount it.',
    response: ok,
  },
  {
    method: 'POST',
    path: '/v1/volumes/:name/snapshots',
    idempotent: true,
    summary: "A read-only snapshot of the volume (a running writer's writes flushed first); new volumes can start from it.",
    status: 201,
    response: VolumeSnapshotSchema,
  },
  { method: 'GET', path: '/v1/volumes/:name/snapshots', summary: "The volume's snapshots, oldest first.", response: VolumeSnapshotListSchema },
  { method: 'DELETE', path: '/v1/volumes/:name/snapshots/:snapshotId', summary: 'Delete a snapshot of the volume.', response: ok },
];

const templateRoutes: PublicRoute[] = [
  {
    method: 'POST',
    path: '/v1/templates',
    idempotent: true,
    summary:
      "Make a template of the tenant's from a checkpoint or a session (an fs checkpoint is taken first): 201 with the template; or build one from a Dockerfile: 202 with the build, which runs in the background (follow its log). A name made again gets a new version.",
    body: CreateTemplateRequestSchema,
    status: 201,
    response: z.union([TemplateSchema, TemplateBuildSchema]),
  },
  {
    method: 'POST',
    path: '/v1/templates/:name/image',
    summary:
      'Import an image as the next version of a template: the body is a `docker save` archive or an OCI layout tar (streamed); or JSON {image: "docker://…"} pulls it where the node reaches a registry. Its env, workdir, user, entrypoint and cmd become the template\'s config.',
    transport: 'binary',
    status: 201,
    response: TemplateSchema,
  },
  {
    method: 'GET',
    path: '/v1/templates/:name/builds/:buildId',
    summary: 'A Dockerfile build: running, succeeded (the version it made) or failed (the step and why).',
    response: TemplateBuildSchema,
  },
  {
    method: 'GET',
    path: '/v1/templates/:name/builds/:buildId/logs',
    summary:
      "The build's log as text: each step with its line, its output, cached steps marked; with ?follow=1 streamed until the build ends, whose result is the last line.",
    transport: 'binary',
    query: BuildLogQuerySchema,
  },
  { method: 'GET', path: '/v1/templates', summary: "The built-in templates and the newest version of each of the tenant's own.", response: TemplateListSchema },
  {
    method: 'DELETE',
    path: '/v1/templates/:name',
    summary: "Delete every version of a tenant's template; refused while sessions made from it exist unless ?force=1 (they keep their files).",
    query: DeleteTemplateQuerySchema,
    response: ok,
  },
];

const egressRoutes: PublicRoute[] = [
  {
    method: 'PUT',
    path: '/v1/secrets/:name',
    summary: "Create or update a tenant's secret (the value is never shown again; the placeholder stays the same).",
    body: PutSecretRequestSchema,
    response: SecretSchema,
  },
  { method: 'GET', path: '/v1/secrets', summary: "The tenant's secrets: names, hosts and placeholders, never values.", response: SecretListSchema },
  { method: 'DELETE', path: '/v1/secrets/:name', summary: 'Delete a secret; sessions naming it keep an unresolved placeholder.', response: ok },
  {
    method: 'PUT',
    path: '/v1/sessions/:sessionId/egress',
    summary: "Change a session's egress policy; applies to its next request.",
    body: EgressPolicySchema,
    response: SessionSchema,
  },
  {
    method: 'DELETE',
    path: '/v1/sessions/:sessionId/secrets/:name',
    summary:
      "Revoke a secret from this session only (its parent, forks and the tenant's secret keep theirs): its gateway injects it no more from the next request. Idempotent: again after a 503 to make sure the node has it.",
    response: SessionSchema,
  },
  {
    method: 'GET',
    path: '/v1/sessions/:sessionId/egress/audit',
    summary: 'The newest egress requests of the session through the gateway, oldest first.',
    query: EgressAuditQuerySchema,
    response: EgressAuditListSchema,
  },
];

const adminRoutes: PublicRoute[] = [
  {
    method: 'GET',
    path: '/v1/limits',
    summary: "The calling tenant's limits, what it uses of each, and the setting that raises each.",
    response: TenantLimitsSchema,
  },
  {
    method: 'GET',
    path: '/v1/usage',
    summary:
      "What was used (CPU, memory, disk, checkpoint storage, egress, sandbox time, checkpoints) over whole UTC hours, by tenant, session or day: the calling tenant's, a session token's own session's, or with the admin key every tenant's.",
    query: UsageQuerySchema,
    response: UsageReportSchema,
  },
  { method: 'POST', path: '/v1/tenants', summary: 'Create a tenant (admin key).', body: CreateTenantRequestSchema, status: 201, response: TenantSchema },
  {
    method: 'POST',
    path: '/v1/keys',
    summary: 'Create an API key for a tenant (admin key); the key is shown once.',
    body: CreateKeyRequestSchema,
    status: 201,
    response: CreatedKeySchema,
  },
  { method: 'GET', path: '/v1/nodes', summary: 'The nodes of the cluster with their status and sessions (admin key).', response: NodeListSchema },
  {
    method: 'POST',
    path: '/v1/nodes/:nodeId/drain',
    summary:
      "Drain a node (admin key, or the node's own credential: a node pod drains itself as it stops): it takes no new sessions, and each of its sessions moves to another node through the object store.",
    response: DrainResultSchema,
  },
  {
    method: 'POST',
    path: '/v1/nodes/:nodeId/undrain',
    summary: "A drained node takes new sessions again (admin key, or the node's own credential).",
    response: NodeViewSchema,
  },
  {
    method: 'POST',
    path: '/v1/nodes/heartbeat',
    summary:
      'A node agent registers and says it is alive (its node credential; the admin key is taken too, with a warning); sent by node agents every few seconds. When it joins it sends its sessions, and the reply names those that moved away meanwhile, to stop.',
    body: NodeHeartbeatSchema,
    response: NodeHeartbeatReplySchema,
  },
  {
    method: 'POST',
    path: '/v1/nodes/join-tokens',
    summary:
      'A token for new nodes to join the cluster with (admin key), usable for `ttlSec` (an hour by default) by `uses` nodes (one by default; a Kubernetes DaemonSet shares one).',
    body: CreateJoinTokenRequestSchema,
    status: 201,
    response: JoinTokenSchema,
  },
  {
    method: 'POST',
    path: '/v1/nodes/join',
    summary:
      'A node trades a join token for its own credential, once (no key: the token is the proof). The credential heartbeats for that node id only and reaches no other route; joining again replaces it.',
    body: NodeJoinRequestSchema,
    status: 201,
    response: NodeJoinReplySchema,
    withoutKey: true,
  },
  {
    method: 'POST',
    path: '/v1/nodes/certificate',
    summary:
      "A node renews its node API's certificate before it expires (its own credential, for its own node id only): a certificate of the cluster CA for the new key of `csr`, naming `hosts`.",
    body: NodeCertificateRequestSchema,
    response: NodeCertificateReplySchema,
  },
  {
    method: 'DELETE',
    path: '/v1/nodes/:nodeId/credential',
    summary: "Revoke a node's credential (admin key): its heartbeats are refused, it fences itself, and its sessions move on once it is found lost.",
    response: RevokedCredentialSchema,
  },
];

/** The sandbox operations, as the public API exposes them under each session. */
const sandboxOperations: PublicRoute[] = sandboxRoutes.map((route) => {
  const path = `/v1/sessions/:sessionId${route.path}`;
  switch (route.kind) {
    case 'json':
      return {
        method: route.method,
        path,
        summary: `Sandbox operation ${route.path}.`,
        body: route.body,
        query: route.query,
        response: route.response,
        ...(route.method === 'GET' ? {} : { idempotent: true as const }),
      };
    case 'events':
      return {
        method: route.method,
        path,
        summary: `Sandbox operation ${route.path}, answered as a stream of events.`,
        transport: 'ndjson',
        body: route.body,
        response: route.stream.event,
      };
    case 'download':
      return { method: route.method, path, summary: 'Download a file (streamed bytes).', transport: 'binary', query: route.query };
    case 'upload':
      return {
        method: route.method,
        path,
        summary: 'Upload a file (streamed bytes in the body).',
        transport: 'binary',
        query: route.query,
        response: route.response,
        idempotent: true,
      };
    case 'websocket':
      return { method: route.method, path, summary: `WebSocket stream ${route.path}.`, transport: 'websocket', query: route.query };
  }
});

export const publicRoutes: readonly PublicRoute[] = [
  ...serviceRoutes,
  ...sessionRoutes,
  ...checkpointFileRoutes,
  ...volumeRoutes,
  ...templateRoutes,
  ...egressRoutes,
  ...sandboxOperations,
  ...adminRoutes,
];
