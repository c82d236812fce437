import {
  EgressAuditQuerySchema,
  EgressPolicySchema,
  PutSecretRequestSchema,
  SecretNameSchema,
  CreateCheckpointRequestSchema,
  CreateKeyRequestSchema,
  CreateSessionRequestSchema,
  CreateTenantRequestSchema,
  ForkRequestSchema,
  RestoreRequestSchema,
  newId,
  NodeHeartbeatSchema,
  NodeJoinRequestSchema,
  NodeCertificateRequestSchema,
  CreateJoinTokenRequestSchema,
  NodeIdSchema,
  SetTimeoutRequestSchema,
  ServiceNameSchema,
  ServiceSpecSchema,
  publicRoutes,
  UsageQuerySchema,
} from '@space/protocol';
import type { SessionCheckpointService } from '../sessions/session-checkpoint-service.js';
import type { SessionPauser } from '../sessions/session-pauser.js';
import type { SessionServices } from '../sessions/session-services.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { NodeDrain } from '../sessions/node-drain.js';
import { Router, type ServerLog, type Tracer, parseQuery, parseWith, readJson, sendJson } from '@space/server-kit';
import type { EgressService } from '../tenants/egress-service.js';
import type { NodeHeartbeats } from '../maintenance/node-heartbeats.js';
import type { Authenticator } from '../tenants/auth.js';
import type { TenantLimits } from '../tenants/tenant-limits.js';
import type { SessionCalls } from '../sessions/session-calls.js';
import type { SessionService } from '../sessions/session-service.js';
import type { Store } from '../store/store.js';
import { registerSandboxRoutes } from './sandbox-routes.js';
import type { CellCheckpoints } from '../sessions/cell-checkpoints.js';
import { registerDesktopRoutes } from './desktop-routes.js';
import { type PreviewOptions, registerPortRoutes } from './port-routes.js';
import { registerVolumeRoutes } from './volume-routes.js';
import { registerCheckpointFileRoutes } from './checkpoint-file-routes.js';
import type { CheckpointFileReader } from '../sessions/checkpoint-file-reader.js';
import type { PathRestorer } from '../sessions/path-restorer.js';
import { registerEventRoutes } from './event-routes.js';
import type { TenantEvents } from '../tenants/tenant-events.js';
import { type MetricsHistory, type MetricsReport, tenantUsageText } from './metrics-report.js';
import type { UsageReports } from '../usage/usage-reports.js';
import { type TemplateRouteDeps, registerTemplateRoutes } from './template-routes.js';
import type { VolumeService } from '../sessions/volume-service.js';
import type { IdempotentCalls } from './idempotent-calls.js';
import type { NodeCredentials } from '../tenants/node-credentials.js';

export interface PublicApiDeps {
  auth: Authenticator;
  sessions: SessionService;
  calls: SessionCalls;
  cells: CellCheckpoints;
  checkpoints: SessionCheckpointService;
  checkpointFiles: CheckpointFileReader;
  pathRestorer: PathRestorer;
  pauser: SessionPauser;
  services: SessionServices;
  store: Store;
  nodes: NodeDirectory;
  /** A node's heartbeat, and what it says the node needs. */
  heartbeats: NodeHeartbeats;
  drain: NodeDrain;
  egress: EgressService;
  log: ServerLog;
  limits: TenantLimits;
  templates: TemplateRouteDeps;
  volumes: VolumeService;
  preview: PreviewOptions;
  events: TenantEvents;
  metricsReport: MetricsReport;
  metricsHistory: MetricsHistory;
  idempotency: IdempotentCalls;
  nodeCredentials: NodeCredentials;
  usage: UsageReports;
  /** Traces every call (`OTEL_EXPORTER_OTLP_ENDPOINT`); null: none. */
  tracer?: Tracer | null;
}

/** The public HTTP API under /v1 (see docs/api.md). */
export function createPublicApi(deps: PublicApiDeps): Router {
  const { auth, sessions, checkpoints, store } = deps;
  // Every route is declared in protocol's table (its schemas and reference entry) before it is served here.
  // A route whose table entry takes an Idempotency-Key runs at most once per key (idempotent-calls.ts).
  const idempotent = new Set(publicRoutes.filter((r) => r.idempotent).map((r) => `${r.method} ${r.path}`));
  const router = new Router({
    log: deps.log,
    service: 'cp',
    admit: deps.limits.admit,
    table: publicRoutes,
    around: (method, path, handler) => (idempotent.has(`${method} ${path}`) ? deps.idempotency.wrap(handler) : handler),
    tracer: deps.tracer ?? null,
  });

  router.on('GET', '/healthz', async ({ res }) => sendJson(res, 200, { ok: true }));

  // Aggregate numbers only, no ids: readable without a key, like /healthz, for Prometheus.
  // With the admin key (Prometheus' bearer credentials), also each tenant's usage: tenant ids are not for every scraper.
  router.on('GET', '/metrics', async ({ req, res }) => {
    const perTenant = req.headers.authorization !== undefined;
    if (perTenant) auth.requireAdmin(await auth.authenticate(req));
    const text = (await deps.metricsReport.text()) + (perTenant ? tenantUsageText(await deps.usage.totals()) : '');
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });

  // The same, a sample a minute for the last hour of this control plane (the console's charts).
  router.on('GET', '/v1/metrics/history', async ({ res }) => sendJson(res, 200, { samples: deps.metricsHistory.samples() }));

  router.on('GET', '/v1/usage', async ({ req, res, url }) => {
    sendJson(res, 200, await deps.usage.report(await auth.authenticate(req), parseQuery(url, UsageQuerySchema)));
  });

  router.on('POST', '/v1/tenants', async ({ req, res }) => {
    auth.requireAdmin(await auth.authenticate(req));
    const { name } = await readJson(req, CreateTenantRequestSchema);
    const tenant = { id: newId('tn'), name, createdAt: new Date().toISOString() };
    await store.insertTenant(tenant);
    sendJson(res, 201, tenant);
  });

  router.on('POST', '/v1/keys', async ({ req, res }) => {
    auth.requireAdmin(await auth.authenticate(req));
    const { tenantId, format } = await readJson(req, CreateKeyRequestSchema);
    sendJson(res, 201, await auth.createKey(tenantId, format));
  });

  router.on('GET', '/v1/nodes', async ({ req, res }) => {
    auth.requireAdmin(await auth.authenticate(req));
    sendJson(res, 200, { nodes: await deps.nodes.list() });
  });

  router.on('POST', '/v1/nodes/:nodeId/drain', async ({ req, res, params }) => {
    const nodeId = parseWith(NodeIdSchema, params.nodeId, 'node id');
    await deps.nodeCredentials.requireAdminOrNode(req, nodeId, 'drain');
    sendJson(res, 200, await deps.drain.drain(nodeId));
  });

  router.on('POST', '/v1/nodes/:nodeId/undrain', async ({ req, res, params }) => {
    const nodeId = parseWith(NodeIdSchema, params.nodeId, 'node id');
    await deps.nodeCredentials.requireAdminOrNode(req, nodeId, 'undrain');
    sendJson(res, 200, await deps.drain.undrain(nodeId));
  });

  router.on('POST', '/v1/nodes/heartbeat', async ({ req, res }) => {
    const sender = await deps.nodeCredentials.senderOf(req);
    const beat = await readJson(req, NodeHeartbeatSchema);
    deps.nodeCredentials.checkSender(sender, beat.id);
    sendJson(res, 200, await deps.heartbeats.receive(beat));
  });

  router.on('POST', '/v1/nodes/join-tokens', async ({ req, res }) => {
    auth.requireAdmin(await auth.authenticate(req));
    sendJson(res, 201, await deps.nodeCredentials.createJoinToken(await readJson(req, CreateJoinTokenRequestSchema)));
  });

  router.on('POST', '/v1/nodes/join', async ({ req, res }) => {
    sendJson(res, 201, await deps.nodeCredentials.join(await readJson(req, NodeJoinRequestSchema)));
  });

  router.on('POST', '/v1/nodes/certificate', async ({ req, res }) => {
    const sender = await deps.nodeCredentials.senderOf(req);
    sendJson(res, 200, await deps.nodeCredentials.renewCertificate(sender, await readJson(req, NodeCertificateRequestSchema)));
  });

  router.on('DELETE', '/v1/nodes/:nodeId/credential', async ({ req, res, params }) => {
    auth.requireAdmin(await auth.authenticate(req));
    sendJson(res, 200, await deps.nodeCredentials.revoke(parseWith(NodeIdSchema, params.nodeId, 'node id')));
  });

  router.on('POST', '/v1/sessions', async ({ req, res }) => {
    const caller = await auth.authenticate(req);
    const request = await readJson(req, CreateSessionRequestSchema);
    sendJson(res, 201, await deps.limits.whileCreating(caller.tenantId, 1, () => sessions.create(caller, request)));
  });

  router.on('GET', '/v1/sessions', async ({ req, res }) => {
    sendJson(res, 200, { sessions: await sessions.list(await auth.authenticate(req)) });
  });

  router.on('GET', '/v1/sessions/:sessionId', async ({ req, res, params }) => {
    sendJson(res, 200, await sessions.get(await auth.authenticate(req), params.sessionId!));
  });

  router.on('DELETE', '/v1/sessions/:sessionId', async ({ req, res, params }) => {
    await sessions.delete(await auth.authenticate(req), params.sessionId!);
    sendJson(res, 200, { ok: true });
  });

  router.on('POST', '/v1/sessions/:sessionId/sandbox/kill', async ({ req, res, params }) => {
    await sessions.killSandbox(await auth.authenticate(req), params.sessionId!);
    sendJson(res, 200, { ok: true });
  });

  router.on('GET', '/v1/sessions/:sessionId/metrics', async ({ req, res, params }) => {
    sendJson(res, 200, await sessions.metrics(await auth.authenticate(req), params.sessionId!));
  });

  router.on('PUT', '/v1/sessions/:sessionId/services/:name', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const name = parseWith(ServiceNameSchema, params.name, 'service name');
    sendJson(res, 200, await deps.services.put(caller, params.sessionId!, { name, ...(await readJson(req, ServiceSpecSchema)) }));
  });

  router.on('DELETE', '/v1/sessions/:sessionId/services/:name', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, await deps.services.remove(caller, params.sessionId!, parseWith(ServiceNameSchema, params.name, 'service name')));
  });

  router.on('POST', '/v1/sessions/:sessionId/pause', async ({ req, res, params }) => {
    sendJson(res, 200, { checkpoint: await deps.pauser.pause(await auth.authenticate(req), params.sessionId!) });
  });

  router.on('POST', '/v1/sessions/:sessionId/timeout', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const { timeoutSec, onTimeout } = await readJson(req, SetTimeoutRequestSchema);
    await deps.pauser.setTimeout(caller, params.sessionId!, timeoutSec, onTimeout);
    sendJson(res, 200, await sessions.get(caller, params.sessionId!));
  });

  router.on('POST', '/v1/sessions/:sessionId/tokens', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const row = await sessions.row(caller, params.sessionId!);
    sendJson(res, 201, await auth.createSessionToken(row.tenantId, row.id));
  });

  router.on('POST', '/v1/sessions/:sessionId/checkpoints', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const { kind } = await readJson(req, CreateCheckpointRequestSchema);
    sendJson(res, 201, await checkpoints.create(caller, params.sessionId!, kind));
  });

  router.on('GET', '/v1/sessions/:sessionId/checkpoints', async ({ req, res, params }) => {
    sendJson(res, 200, { checkpoints: await checkpoints.list(await auth.authenticate(req), params.sessionId!) });
  });

  router.on('POST', '/v1/checkpoints/:checkpointId/fork', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const { count, secrets } = await readJson(req, ForkRequestSchema);
    const forks = await deps.limits.whileCreating(caller.tenantId, count, () => checkpoints.fork(caller, params.checkpointId!, count, secrets));
    sendJson(res, 201, { sessions: forks });
  });

  router.on('POST', '/v1/sessions/:sessionId/restore', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const { checkpointId, restoreVolumes } = await readJson(req, RestoreRequestSchema);
    sendJson(res, 200, await checkpoints.restore(caller, params.sessionId!, checkpointId, restoreVolumes));
  });

  router.on('GET', '/v1/limits', async ({ req, res }) => {
    sendJson(res, 200, { ...(await deps.limits.view((await auth.authenticate(req)).tenantId)), defaultDiskGb: sessions.defaultDiskGb });
  });

  router.on('GET', '/v1/secrets', async ({ req, res }) => {
    sendJson(res, 200, { secrets: await deps.egress.list(await auth.authenticate(req)) });
  });

  router.on('PUT', '/v1/secrets/:name', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const name = parseWith(SecretNameSchema, params.name, 'secret name');
    sendJson(res, 200, await deps.egress.put(caller, name, await readJson(req, PutSecretRequestSchema)));
  });

  router.on('DELETE', '/v1/secrets/:name', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    await deps.egress.delete(caller, parseWith(SecretNameSchema, params.name, 'secret name'));
    sendJson(res, 200, { ok: true });
  });

  router.on('PUT', '/v1/sessions/:sessionId/egress', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const row = await sessions.row(caller, params.sessionId!);
    await deps.egress.setPolicy(row, await readJson(req, EgressPolicySchema));
    sendJson(res, 200, await sessions.get(caller, row.id));
  });

  router.on('DELETE', '/v1/sessions/:sessionId/secrets/:name', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const name = parseWith(SecretNameSchema, params.name, 'secret name');
    await deps.egress.revoke(await sessions.row(caller, params.sessionId!), name);
    sendJson(res, 200, await sessions.get(caller, params.sessionId!));
  });

  router.on('GET', '/v1/sessions/:sessionId/egress/audit', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    const { limit } = parseQuery(url, EgressAuditQuerySchema);
    sendJson(res, 200, await deps.egress.audit(await sessions.row(caller, params.sessionId!), limit));
  });

  registerSandboxRoutes(router, auth, sessions, deps.calls, deps.cells);
  registerPortRoutes(router, auth, sessions, deps.calls, store, deps.preview);
  registerDesktopRoutes(router, auth, sessions, deps.calls, deps.preview.domain);
  registerVolumeRoutes(router, auth, deps.volumes);
  registerCheckpointFileRoutes(router, auth, deps.checkpointFiles, deps.pathRestorer);
  registerTemplateRoutes(router, auth, deps.templates);
  registerEventRoutes(router, auth, deps.events);
  return router;
}
