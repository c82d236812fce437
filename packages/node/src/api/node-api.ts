import { ErrorCode, Limits, SpaceError, type NodeCapacity, nodeRouteTable, nodeRoutes } from '@space/protocol';
import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Router, type ServeRoute, type ServerLog, type Tracer, bearerToken, secretsEqual, serveRoute, warnWhileWaiting } from '@space/server-kit';
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
import type { CheckpointFiles } from '../storage/checkpoint-files.js';
import type { CheckpointShipping } from '../storage/checkpoint-shipping.js';
import type { NamedVolumes } from '../storage/named-volumes.js';
import { registryHost } from '../templates/registry-host.js';
import type { NodeFence } from '../node-fence.js';
import { PlacementEpochs } from '../placement-epochs.js';
import { refuseUnlessControlPlane } from './control-plane-peer.js';
import type { UsageLedger } from '../usage/usage-ledger.js';
import type { HostDiskWatch } from '../storage/host-disk.js';

/** Usage batches one collection takes, in count and in bytes (at least one): a node far behind is caught up over several. */
const usageBatchesPerCall = 60;
const usageBytesPerCall = 16 * 2 ** 20;
/** How long a node API call may run before it is logged as still under way (and again each time as long). */
const slowCallWarningMs = 30_000;

export interface NodeApiDeps {
  nodeId: string;
  capacity: NodeCapacity;
  token: string;
  manager: SandboxManager;
  metrics: SandboxMetricsReader;
  starter: SandboxStarter;
  pool: WarmPool;
  checkpoints: NodeCheckpointService;
  /** Checkpoints' files, read without a sandbox. */
  checkpointFiles: CheckpointFiles;
  namedVolumes: NamedVolumes;
  shipping: CheckpointShipping;
  templates: TemplateStore;
  gateway: EgressGateway;
  hostDisk: Pick<HostDiskWatch, 'state'>;
  fence: NodeFence;
  /** The newest placement of each session seen here: calls naming an older one are refused. */
  placements: PlacementEpochs;
  /** What the node measured, until a control plane stores it. */
  usage: UsageLedger;
  /** Traces every call, continuing the control plane's traceparent; null: none. */
  tracer: Tracer | null;
  log: ServerLog;
}

/**
 * The node API: what the control plane uses, locally or across the network, each operation as
 * protocol's `nodeRoutes` declares it (a route missing there is refused). Every route needs the
 * node token (and over mutual TLS a control plane's certificate); while the node is fenced every route but its health is refused, and so is a call
 * naming an older placement of its session than the newest seen here (`PlacementEpochs`).
 */
export function createNodeApi(deps: NodeApiDeps): Router {
  const { manager } = deps;
  const authorize = (ctx: { req: IncomingMessage }): void => {
    refuseUnlessControlPlane(ctx.req);
    const token = bearerToken(ctx.req);
    if (!token || !secretsEqual(token, deps.token)) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'node token missing or wrong');
  };
  const admit = (ctx: { req: IncomingMessage }): void => {
    authorize(ctx);
    deps.fence.refuseIfFenced();
    deps.placements.admit(PlacementEpochs.of(ctx.req));
  };
  const router = new Router({ log: deps.log, service: 'node', table: nodeRouteTable, tracer: deps.tracer });
  // A call still unanswered after a while is logged as it waits: a hung operation (a start, a
  // checkpoint) names itself, and the session whose calls queue behind it, while it hangs.
  const serve: ServeRoute = (route, handler) =>
    serveRoute(router, route, (route as unknown) === nodeRoutes.health ? authorize : admit, (input, ctx) =>
      warnWhileWaiting(
        () => handler(input, ctx),
        slowCallWarningMs,
        (waited) => deps.log.warn(`${route.method} ${ctx.url.pathname} still under way after ${waited} s`),
      ),
    );
  const ok = { ok: true } as const;

  serve(nodeRoutes.health, () => ({
    nodeId: deps.nodeId,
    templates: deps.templates.names(),
    sandboxes: manager.count(),
    pool: deps.pool.sizes(),
    templateImages: deps.pool.imagesReady(),
    starts: deps.starter.startCounts(),
    egressUnconfigured: manager.egressUnconfigured(),
    usageBatches: deps.usage.pendingCount,
    capacity: deps.capacity,
    gatewayRequests: deps.gateway.requestCounts(),
    storage: deps.hostDisk.state,
  }));
  serve(nodeRoutes.usageBatches, () => ({ batches: deps.usage.unacknowledged(usageBatchesPerCall, usageBytesPerCall) }));
  serve(nodeRoutes.ackUsage, async ({ body }) => {
    await deps.usage.acknowledge(body.ledger, body.through);
    return ok;
  });
  serve(nodeRoutes.listSandboxes, () => ({ sandboxes: manager.list() }));
  serve(nodeRoutes.startSandbox, ({ body }) => deps.starter.start(body));
  serve(nodeRoutes.sandboxInfo, ({ params }) => manager.info(params.sandboxId));
  serve(nodeRoutes.sandboxMetrics, ({ params }) => deps.metrics.read(params.sandboxId));
  serve(nodeRoutes.stopSandbox, async ({ params }) => {
    await manager.kill(params.sandboxId);
    return ok;
  });
  serve(nodeRoutes.startService, async ({ params, body }) => {
    await manager.getAlive(params.sandboxId);
    const failed = await manager.startServices(params.sandboxId, [body]);
    if (failed.length > 0) throw new SpaceError(ErrorCode.EXEC_FAILED, `service ${failed[0]}`);
    return ok;
  });
  serve(nodeRoutes.stopService, async ({ params }) => ({ stopped: await manager.stopService(params.sandboxId, params.name) }));

  serve(nodeRoutes.deleteVolume, async ({ params }) => {
    await manager.deleteVolume(params.sessionId);
    deps.placements.forget(params.sessionId);
    return ok;
  });
  serve(nodeRoutes.checkpoint, ({ params, body }) => deps.checkpoints.take(params.sessionId, body.checkpointId, body.kind, body.volumes));
  serve(nodeRoutes.volumeChanged, async ({ params, query }) => ({ changed: await deps.checkpoints.changedSince(params.sessionId, query.since) }));
  serve(nodeRoutes.restoreVolume, async ({ params, body }) => {
    await deps.checkpoints.restore(params.sessionId, body.checkpointId);
    return ok;
  });

  serve(nodeRoutes.configureEgress, ({ params, body }) => {
    deps.gateway.configure(params.sessionId, body);
    return ok;
  });
  serve(nodeRoutes.egressAudit, async ({ params, query }) => ({ entries: await deps.gateway.auditOf(params.sessionId, query.limit) }));

  serve(nodeRoutes.listCheckpoints, async () => ({ checkpoints: await deps.checkpoints.list() }));
  serve(nodeRoutes.checkpointFile, async ({ params, query }, ctx) => {
    const { stream, size } = await deps.checkpointFiles.read(params.checkpointId, query.path);
    ctx.res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) });
    await pipeline(stream, ctx.res);
  });
  serve(nodeRoutes.checkpointFileList, ({ params, query }) => deps.checkpointFiles.list(params.checkpointId, query.path));
  serve(nodeRoutes.checkpointFileStat, ({ params, query }) => deps.checkpointFiles.stat(params.checkpointId, query.path));
  serve(nodeRoutes.checkpointDiff, async ({ params, query }) => ({
    from: params.checkpointId,
    to: query.to,
    ...(await deps.checkpointFiles.diff(params.checkpointId, query.to, query.after, query.limit)),
  }));
  serve(nodeRoutes.pathVersions, async ({ body }) => ({ versions: await deps.checkpointFiles.versions(body.checkpointIds, body.path) }));
  serve(nodeRoutes.deleteCheckpoint, async ({ params }) => {
    await deps.checkpoints.delete(params.checkpointId);
    return ok;
  });
  serve(nodeRoutes.createBase, ({ body }) => deps.shipping.createBase(body.baseId, body.fromCheckpointId, body.dataKey));
  serve(nodeRoutes.deleteBase, async ({ params }) => {
    await deps.shipping.deleteBase(params.baseId);
    return ok;
  });
  serve(nodeRoutes.deleteBases, async ({ body }) => {
    for (const baseId of body.baseIds) await deps.shipping.deleteBase(baseId);
    return ok;
  });
  serve(nodeRoutes.shipCheckpoint, async ({ params, body }) => ({ objects: await deps.shipping.ship(params.checkpointId, body.base, body.dataKey) }));
  serve(nodeRoutes.fetchCheckpoint, async ({ params, body }) => {
    await deps.shipping.fetch(params.checkpointId, body.base, body.objects, body.dataKey);
    return ok;
  });
  serve(nodeRoutes.deleteObjects, async ({ body }) => {
    await deps.shipping.deleteObjects(body.keys);
    return ok;
  });

  serve(nodeRoutes.createTemplate, async ({ body }) => {
    await deps.templates.createCustom(body.templateId, await deps.checkpoints.snapshotOf(body.checkpointId));
    return ok;
  });
  // An image archive, streamed to a file on the node's volume (bounded), then imported.
  serve(nodeRoutes.importImage, async ({ params }, ctx) => {
    const archive = deps.templates.importArchivePath(params.templateId);
    try {
      await receiveFile(ctx.req, archive, Limits.maxUploadBytes);
      return { config: await deps.templates.importCustom(params.templateId, { archive }, () => undefined) };
    } finally {
      await rm(archive, { force: true });
    }
  });
  serve(nodeRoutes.pullImage, async ({ params, body }) => {
    const host = registryHost(body.image);
    if (!host) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `cannot read the registry of ${body.image}`);
    const refused = await deps.gateway.registryRefusal(host);
    if (refused)
      throw new SpaceError(
        ErrorCode.VALIDATION_FAILED,
        `images are not pulled from ${host}: pulls follow the rules of sandbox egress (no loopback, link-local, private or this host's addresses; IPv6 only with SPACE_EGRESS_IPV6)`,
      );
    return { config: await deps.templates.importCustom(params.templateId, { registry: body.image }, () => undefined) };
  });
  serve(nodeRoutes.deleteTemplate, async ({ params }) => {
    await deps.pool.forget(params.templateId);
    await deps.templates.deleteCustom(params.templateId);
    return ok;
  });

  registerSandboxProxy(router, manager, admit);
  registerPortProxy(router, manager, admit, serve);
  registerNamedVolumeRoutes(serve, deps.namedVolumes, manager);
  return router;
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
