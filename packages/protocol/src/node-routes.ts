import { z } from 'zod';
import type { ApiRoute } from './api-route.js';
import {
  CheckpointIdSchema,
  NodeCheckpointIdSchema,
  NodeCheckpointListSchema,
  NodeCheckpointRequestSchema,
  NodeCheckpointSchema,
  NodeVolumeChangedQuerySchema,
  NodeVolumeChangedSchema,
} from './checkpoints.js';
import {
  NodeCheckpointDiffQuerySchema,
  CheckpointDiffSchema,
  NodeCheckpointPathQuerySchema,
  NodePathVersionsRequestSchema,
  NodePathVersionsSchema,
} from './checkpoint-files.js';
import { OkSchema as ok } from './common.js';
import { FileListSchema, FileStatSchema } from './files.js';
import { EgressAuditListSchema, EgressAuditQuerySchema, SessionEgressConfigSchema } from './egress.js';
import {
  NodeHealthSchema,
  SandboxInfoListSchema,
  SandboxInfoSchema,
  SandboxMetricsSchema,
  ServiceStoppedSchema,
  StartSandboxRequestSchema,
} from './node-api.js';
import { ListeningPortsSchema } from './ports.js';
import { sandboxRoutes } from './sandbox-routes.js';
import { ServiceNameSchema, ServiceSchema } from './sessions.js';
import {
  NodeCreateBaseRequestSchema,
  NodeDeleteObjectsRequestSchema,
  NodeFetchRequestSchema,
  NodeShipRequestSchema,
  NodeShippedSchema,
  ShipBaseIdSchema,
  NodeDeleteBasesRequestSchema,
  ShipBaseSchema,
} from './shipping.js';
import { NodeUsageAckSchema, NodeUsageBatchListSchema } from './usage.js';
import { NodeCreateTemplateRequestSchema, NodeImageImportedSchema, NodePullImageRequestSchema, TemplateIdSchema } from './templates.js';
import {
  NodeCreateVolumeRequestSchema,
  NodeVolumeRestoreRequestSchema,
  NodeVolumeSnapshotRequestSchema,
  NodeVolumeUsageSchema,
  VolumeIdSchema,
  VolumeSnapshotIdSchema,
} from './volumes.js';

/** Session ids name volume directories on a node: only well-formed ones get that far. */
export const NodeSessionIdSchema = z.string().regex(/^ses_[a-z0-9]{6,40}$/, 'session ids look like ses_ and 6-40 lowercase letters or digits');

const sandbox = '/node/v1/sandboxes/:sandboxId';
const session = { sessionId: NodeSessionIdSchema };
const checkpoint = { checkpointId: CheckpointIdSchema };
const template = { templateId: TemplateIdSchema };
const volume = { volumeId: VolumeIdSchema };

/**
 * The node API (control plane -> node agent), one entry per operation: `NodeClient` calls these
 * and the node's server registers them, both from this table. Every route wants the node token.
 */
export const nodeRoutes = {
  health: { method: 'GET', path: '/node/v1/health', status: 200, response: NodeHealthSchema, timeoutMs: 5000 },
  listSandboxes: { method: 'GET', path: '/node/v1/sandboxes', status: 200, response: SandboxInfoListSchema, timeoutMs: 10_000 },
  startSandbox: { method: 'POST', path: '/node/v1/sandboxes', body: StartSandboxRequestSchema, status: 201, response: SandboxInfoSchema },
  sandboxInfo: { method: 'GET', path: sandbox, status: 200, response: SandboxInfoSchema },
  sandboxMetrics: { method: 'GET', path: `${sandbox}/metrics`, status: 200, response: SandboxMetricsSchema },
  stopSandbox: { method: 'DELETE', path: sandbox, status: 200, response: ok },
  startService: { method: 'POST', path: `${sandbox}/services`, body: ServiceSchema, status: 200, response: ok },
  stopService: { method: 'DELETE', path: `${sandbox}/services/:name`, params: { name: ServiceNameSchema }, status: 200, response: ServiceStoppedSchema },
  listeningPorts: { method: 'GET', path: `${sandbox}/ports`, status: 200, response: ListeningPortsSchema },
  deleteVolume: { method: 'DELETE', path: '/node/v1/volumes/:sessionId', params: session, status: 200, response: ok },
  checkpoint: {
    method: 'POST',
    path: '/node/v1/volumes/:sessionId/checkpoints',
    params: session,
    body: NodeCheckpointRequestSchema,
    status: 201,
    response: NodeCheckpointSchema,
  },
  volumeChanged: {
    method: 'GET',
    path: '/node/v1/volumes/:sessionId/changed',
    params: session,
    query: NodeVolumeChangedQuerySchema,
    status: 200,
    response: NodeVolumeChangedSchema,
  },
  restoreVolume: { method: 'POST', path: '/node/v1/volumes/:sessionId/restore', params: session, body: NodeCheckpointIdSchema, status: 200, response: ok },
  configureEgress: { method: 'PUT', path: '/node/v1/sessions/:sessionId/egress', params: session, body: SessionEgressConfigSchema, status: 200, response: ok },
  egressAudit: {
    method: 'GET',
    path: '/node/v1/sessions/:sessionId/egress/audit',
    params: session,
    query: EgressAuditQuerySchema,
    status: 200,
    response: EgressAuditListSchema,
  },
  listCheckpoints: { method: 'GET', path: '/node/v1/checkpoints', status: 200, response: NodeCheckpointListSchema },
  checkpointFile: {
    method: 'GET',
    path: '/node/v1/checkpoints/:checkpointId/files',
    params: checkpoint,
    query: NodeCheckpointPathQuerySchema,
    transport: 'download',
    status: 200,
    response: z.unknown(),
  },
  checkpointFileList: {
    method: 'GET',
    path: '/node/v1/checkpoints/:checkpointId/files/list',
    params: checkpoint,
    query: NodeCheckpointPathQuerySchema,
    status: 200,
    response: FileListSchema,
  },
  checkpointFileStat: {
    method: 'GET',
    path: '/node/v1/checkpoints/:checkpointId/files/stat',
    params: checkpoint,
    query: NodeCheckpointPathQuerySchema,
    status: 200,
    response: FileStatSchema,
  },
  checkpointDiff: {
    method: 'GET',
    path: '/node/v1/checkpoints/:checkpointId/diff',
    params: checkpoint,
    query: NodeCheckpointDiffQuerySchema,
    status: 200,
    response: CheckpointDiffSchema,
    timeoutMs: 120_000,
  },
  pathVersions: { method: 'POST', path: '/node/v1/path-versions', body: NodePathVersionsRequestSchema, status: 200, response: NodePathVersionsSchema },
  deleteCheckpoint: { method: 'DELETE', path: '/node/v1/checkpoints/:checkpointId', params: checkpoint, status: 200, response: ok },
  createBase: { method: 'POST', path: '/node/v1/bases', body: NodeCreateBaseRequestSchema, status: 201, response: ShipBaseSchema },
  // Served for control planes of before `deleteBases`, during a rolling upgrade.
  deleteBase: { method: 'DELETE', path: '/node/v1/bases/:baseId', params: { baseId: ShipBaseIdSchema }, status: 200, response: ok },
  // One call per node for all the bases a sweep collects: a cluster of 1,000 nodes was 1,000 calls a base.
  deleteBases: { method: 'POST', path: '/node/v1/base-deletions', body: NodeDeleteBasesRequestSchema, status: 200, response: ok },
  shipCheckpoint: {
    method: 'POST',
    path: '/node/v1/checkpoints/:checkpointId/ship',
    params: checkpoint,
    body: NodeShipRequestSchema,
    status: 200,
    response: NodeShippedSchema,
  },
  fetchCheckpoint: {
    method: 'POST',
    path: '/node/v1/checkpoints/:checkpointId/fetch',
    params: checkpoint,
    body: NodeFetchRequestSchema,
    status: 200,
    response: ok,
  },
  // A node's batches name every session it holds a volume of: a busy node's are larger than a JSON body.
  usageBatches: { method: 'GET', path: '/node/v1/usage', status: 200, response: NodeUsageBatchListSchema, replyLimitBytes: 64 * 2 ** 20 },
  ackUsage: { method: 'POST', path: '/node/v1/usage/ack', body: NodeUsageAckSchema, status: 200, response: ok },
  deleteObjects: { method: 'POST', path: '/node/v1/objects/delete', body: NodeDeleteObjectsRequestSchema, status: 200, response: ok },
  createTemplate: { method: 'POST', path: '/node/v1/templates', body: NodeCreateTemplateRequestSchema, status: 201, response: ok },
  importImage: {
    method: 'POST',
    path: '/node/v1/templates/:templateId/image',
    params: template,
    transport: 'binary',
    status: 201,
    response: NodeImageImportedSchema,
  },
  pullImage: {
    method: 'POST',
    path: '/node/v1/templates/:templateId/pull',
    params: template,
    body: NodePullImageRequestSchema,
    status: 201,
    response: NodeImageImportedSchema,
    timeoutMs: 3_600_000,
  },
  deleteTemplate: { method: 'DELETE', path: '/node/v1/templates/:templateId', params: template, status: 200, response: ok },
  createNamedVolume: { method: 'POST', path: '/node/v1/named-volumes', body: NodeCreateVolumeRequestSchema, status: 201, response: ok },
  deleteNamedVolume: { method: 'DELETE', path: '/node/v1/named-volumes/:volumeId', params: volume, status: 200, response: ok },
  namedVolumeUsage: { method: 'GET', path: '/node/v1/named-volumes/:volumeId/usage', params: volume, status: 200, response: NodeVolumeUsageSchema },
  snapshotNamedVolume: {
    method: 'POST',
    path: '/node/v1/named-volumes/:volumeId/snapshots',
    params: volume,
    body: NodeVolumeSnapshotRequestSchema,
    status: 201,
    response: ok,
  },
  restoreNamedVolume: {
    method: 'POST',
    path: '/node/v1/named-volumes/:volumeId/restore',
    params: volume,
    body: NodeVolumeRestoreRequestSchema,
    status: 200,
    response: ok,
  },
  deleteVolumeSnapshot: {
    method: 'DELETE',
    path: '/node/v1/volume-snapshots/:snapshotId',
    params: { snapshotId: VolumeSnapshotIdSchema },
    status: 200,
    response: ok,
  },
} as const satisfies Record<string, ApiRoute>;

export type NodeRouteName = keyof typeof nodeRoutes;

/** A sandbox's operations and its ports' previews, relayed by the node under the sandbox's path. */
export const nodeSandboxPrefix = sandbox;
export const nodePortProxyPath = `${sandbox}/ports/:port/*`;

/** Everything the node serves, for its router's table: the routes above, the relayed sandbox operations and the port proxy. */
export const nodeRouteTable: readonly { method: string; path: string; websocket?: true }[] = [
  ...Object.values(nodeRoutes),
  ...sandboxRoutes.map((r) => ({ method: r.method, path: `${sandbox}${r.path}`, ...(r.kind === 'websocket' ? { websocket: true as const } : {}) })),
  { method: 'ANY', path: nodePortProxyPath },
];
