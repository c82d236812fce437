import {
  EgressAuditQuerySchema,
  SessionEgressConfigSchema,
  ErrorCode,
  NodeCheckpointIdSchema,
  NodeCheckpointRequestSchema,
  NodeCreateTemplateRequestSchema,
  NodeVolumeChangedQuerySchema,
  SpaceError,
  StartSandboxRequestSchema,
  TemplateIdSchema,
  type NodeCapacity,
  NodeCreateBaseRequestSchema,
  NodeDeleteObjectsRequestSchema,
  NodeFetchRequestSchema,
  NodeShipRequestSchema,
  ShipBaseIdSchema,
  type NodeHealth,
  ServiceNameSchema,
  ServiceSchema,
  NodePullImageRequestSchema,
  Limits,
} from '@space/protocol';
import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Router, type ServerLog, bearerToken, parseQuery, parseWith, readJson, secretsEqual, sendJson } from '@space/server-kit';
import type { EgressGateway } from '../gateway/egress-gateway.js';
import type { NodeCheckpointService } from '../node-checkpoint-service.js';
import type { IncomingMessage } from 'node:http';
import type { SandboxManager } from '../sandbox/sandbox-manager.js';
import type { SandboxStarter } from '../sandbox/sandbox-starter.js';
import type { WarmPool } from '../warm-pool.js';
import type { TemplateStore } from '../templates/template-store.js';
import { registerSandboxProxy } from './sandbox-proxy.js';
import { registerPortProxy } from './port-proxy.js';
import { registerNamedVolumeRoutes } from './named-volume-routes.js';
import type { SandboxMetricsReader } from '../sandbox/sandbox-metrics.js';
import type { CheckpointShipping } from '../storage/checkpoint-shipping.js';
import type { NamedVolumes } from '../storage/named-volumes.js';
import { registryHost } from '../templates/registry-host.js';

export interface NodeApiDeps {
  nodeId: string;
  capacity: NodeCapacity;
  token: string;
  manager: SandboxManager;
  metrics: SandboxMetricsReader;
  starter: SandboxStarter;
  pool: WarmPool;
  checkpoints: NodeCheckpointService;
  namedVolumes: NamedVolumes;
  shipping: CheckpointShipping;
  templates: TemplateStore;
  gateway: EgressGateway;
  log: ServerLog;
}

/**
 * The node API: what the control plane uses, locally or across the network. Every route needs the
 * node token.
 */
export function createNodeApi(deps: NodeApiDeps): Router {
  const { manager } = deps;
  const authorize = (ctx: { req: IncomingMessage }): void => {
    const token = bearerToken(ctx.req);
    if (!token || !secretsEqual(token, deps.token)) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'node token missing or wrong');
  };
  const router = new Router({ log: deps.log, service: 'node' });

  router.on('GET', '/node/v1/health', (ctx) => {
    authorize(ctx);
    const health: NodeHealth = {
      nodeId: deps.nodeId,
      templates: deps.templates.names(),
      sandboxes: manager.list().length,
      pool: deps.pool.sizes(),
      templateImages: deps.pool.imagesReady(),
      starts: deps.starter.startCounts(),
      egressUnconfigured: manager.egressUnconfigured(),
      capacity: deps.capacity,
      gatewayRequests: deps.gateway.requestCounts(),
    };
    sendJson(ctx.res, 200, health);
  });

  router.on('GET', '/node/v1/sandboxes', (ctx) => {
    authorize(ctx);
    sendJson(ctx.res, 200, { sandboxes: manager.list() });
  });

  router.on('POST', '/node/v1/sandboxes', async (ctx) => {
    authorize(ctx);
    const request = await readJson(ctx.req, StartSandboxRequestSchema);
    sendJson(ctx.res, 201, await deps.starter.start(request));
  });

  router.on('GET', '/node/v1/sandboxes/:sandboxId', async (ctx) => {
    authorize(ctx);
    sendJson(ctx.res, 200, await manager.info(ctx.params.sandboxId!));
  });

  router.on('GET', '/node/v1/sandboxes/:sandboxId/metrics', async (ctx) => {
    authorize(ctx);
    sendJson(ctx.res, 200, await deps.metrics.read(ctx.params.sandboxId!));
  });

  router.on('POST', '/node/v1/sandboxes/:sandboxId/services', async (ctx) => {
    authorize(ctx);
    const service = await readJson(ctx.req, ServiceSchema);
    await manager.getAlive(ctx.params.sandboxId!);
    const failed = await manager.startServices(ctx.params.sandboxId!, [service]);
    if (failed.length > 0) throw new SpaceError(ErrorCode.EXEC_FAILED, `service ${failed[0]}`);
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('DELETE', '/node/v1/sandboxes/:sandboxId/services/:name', async (ctx) => {
    authorize(ctx);
    sendJson(ctx.res, 200, { stopped: await manager.stopService(ctx.params.sandboxId!, parseWith(ServiceNameSchema, ctx.params.name, 'service name')) });
  });

  router.on('DELETE', '/node/v1/sandboxes/:sandboxId', async (ctx) => {
    authorize(ctx);
    await manager.kill(ctx.params.sandboxId!);
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('DELETE', '/node/v1/volumes/:sessionId', async (ctx) => {
    authorize(ctx);
    await manager.deleteVolume(sessionIdParam(ctx.params));
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('POST', '/node/v1/volumes/:sessionId/checkpoints', async (ctx) => {
    authorize(ctx);
    const { checkpointId, kind, volumes } = await readJson(ctx.req, NodeCheckpointRequestSchema);
    sendJson(ctx.res, 201, await deps.checkpoints.take(sessionIdParam(ctx.params), checkpointId, kind, volumes));
  });

  router.on('GET', '/node/v1/volumes/:sessionId/changed', async (ctx) => {
    authorize(ctx);
    const { since } = parseQuery(ctx.url, NodeVolumeChangedQuerySchema);
    sendJson(ctx.res, 200, { changed: await deps.checkpoints.changedSince(sessionIdParam(ctx.params), since) });
  });

  router.on('POST', '/node/v1/volumes/:sessionId/restore', async (ctx) => {
    authorize(ctx);
    const { checkpointId } = await readJson(ctx.req, NodeCheckpointIdSchema);
    await deps.checkpoints.restore(sessionIdParam(ctx.params), checkpointId);
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('PUT', '/node/v1/sessions/:sessionId/egress', async (ctx) => {
    authorize(ctx);
    const sessionId = sessionIdParam(ctx.params);
    deps.gateway.configure(sessionId, await readJson(ctx.req, SessionEgressConfigSchema));
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('GET', '/node/v1/sessions/:sessionId/egress/audit', async (ctx) => {
    authorize(ctx);
    const { limit } = parseQuery(ctx.url, EgressAuditQuerySchema);
    sendJson(ctx.res, 200, { entries: await deps.gateway.auditOf(sessionIdParam(ctx.params), limit) });
  });

  router.on('GET', '/node/v1/checkpoints', async (ctx) => {
    authorize(ctx);
    sendJson(ctx.res, 200, { checkpoints: await deps.checkpoints.list() });
  });

  router.on('DELETE', '/node/v1/checkpoints/:checkpointId', async (ctx) => {
    authorize(ctx);
    const { checkpointId } = parseWith(NodeCheckpointIdSchema, { checkpointId: ctx.params.checkpointId }, 'checkpoint id');
    await deps.checkpoints.delete(checkpointId);
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('POST', '/node/v1/bases', async (ctx) => {
    authorize(ctx);
    const { baseId, fromCheckpointId } = await readJson(ctx.req, NodeCreateBaseRequestSchema);
    sendJson(ctx.res, 201, await deps.shipping.createBase(baseId, fromCheckpointId));
  });

  router.on('DELETE', '/node/v1/bases/:baseId', async (ctx) => {
    authorize(ctx);
    await deps.shipping.deleteBase(parseWith(ShipBaseIdSchema, ctx.params.baseId, 'base id'));
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('POST', '/node/v1/checkpoints/:checkpointId/ship', async (ctx) => {
    authorize(ctx);
    const { checkpointId } = parseWith(NodeCheckpointIdSchema, { checkpointId: ctx.params.checkpointId }, 'checkpoint id');
    const { base } = await readJson(ctx.req, NodeShipRequestSchema);
    sendJson(ctx.res, 200, { objects: await deps.shipping.ship(checkpointId, base) });
  });

  router.on('POST', '/node/v1/checkpoints/:checkpointId/fetch', async (ctx) => {
    authorize(ctx);
    const { checkpointId } = parseWith(NodeCheckpointIdSchema, { checkpointId: ctx.params.checkpointId }, 'checkpoint id');
    const { base, objects } = await readJson(ctx.req, NodeFetchRequestSchema);
    await deps.shipping.fetch(checkpointId, base, objects);
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('POST', '/node/v1/objects/delete', async (ctx) => {
    authorize(ctx);
    const { keys } = await readJson(ctx.req, NodeDeleteObjectsRequestSchema);
    await deps.shipping.deleteObjects(keys);
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('POST', '/node/v1/templates', async (ctx) => {
    authorize(ctx);
    const { templateId, checkpointId } = await readJson(ctx.req, NodeCreateTemplateRequestSchema);
    await deps.templates.createCustom(templateId, await deps.checkpoints.snapshotOf(checkpointId));
    sendJson(ctx.res, 201, { ok: true });
  });

  // An image archive, streamed to a file on the node's volume (bounded), then imported.
  router.on('POST', '/node/v1/templates/:templateId/image', async (ctx) => {
    authorize(ctx);
    const templateId = parseWith(TemplateIdSchema, ctx.params.templateId, 'template id');
    const archive = deps.templates.importArchivePath(templateId);
    try {
      await receiveFile(ctx.req, archive, Limits.maxUploadBytes);
      const config = await deps.templates.importCustom(templateId, { archive }, () => undefined);
      sendJson(ctx.res, 201, { config });
    } finally {
      await rm(archive, { force: true });
    }
  });

  router.on('POST', '/node/v1/templates/:templateId/pull', async (ctx) => {
    authorize(ctx);
    const templateId = parseWith(TemplateIdSchema, ctx.params.templateId, 'template id');
    const { image } = await readJson(ctx.req, NodePullImageRequestSchema);
    const host = registryHost(image);
    if (!host) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `cannot read the registry of ${image}`);
    const refused = await deps.gateway.registryRefusal(host);
    if (refused)
      throw new SpaceError(
        ErrorCode.VALIDATION_FAILED,
        `images are not pulled from ${host}: pulls follow the rules of sandbox egress (no loopback, link-local, private or this host's addresses; IPv6 only with SPACE_EGRESS_IPV6)`,
      );
    const config = await deps.templates.importCustom(templateId, { registry: image }, () => undefined);
    sendJson(ctx.res, 201, { config });
  });

  router.on('DELETE', '/node/v1/templates/:templateId', async (ctx) => {
    authorize(ctx);
    const templateId = parseWith(TemplateIdSchema, ctx.params.templateId, 'template id');
    await deps.pool.forget(templateId);
    await deps.templates.deleteCustom(templateId);
    sendJson(ctx.res, 200, { ok: true });
  });

  registerSandboxProxy(router, manager, authorize);
  registerPortProxy(router, manager, authorize);
  registerNamedVolumeRoutes(router, deps.namedVolumes, manager, authorize);
  return router;
}

/** Session ids name volume directories: only well-formed ids get that far. */
function sessionIdParam(params: Record<string, string>): string {
  const id = params.sessionId ?? '';
  if (!/^ses_[a-z0-9]{6,40}$/.test(id)) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `malformed session id ${JSON.stringify(id)}`);
  return id;
}

/** Streams a request body into `file` (made 0600), refusing one larger than `maxBytes`. */
async function receiveFile(req: IncomingMessage, file: string, maxBytes: number): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  let received = 0;
  const bound = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      received += chunk.length;
      done(received > maxBytes ? new SpaceError(ErrorCode.PAYLOAD_TOO_LARGE, `the image is larger than ${maxBytes} bytes`) : null, chunk);
    },
  });
  await pipeline(req, bound, createWriteStream(file, { mode: 0o600 }));
}
