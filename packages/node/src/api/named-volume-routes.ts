import type { IncomingMessage } from 'node:http';
import {
  NodeCreateVolumeRequestSchema,
  NodeVolumeRestoreRequestSchema,
  NodeVolumeSnapshotRequestSchema,
  VolumeIdSchema,
  VolumeSnapshotIdSchema,
} from '@space/protocol';
import { type Router, parseWith, readJson, sendJson } from '@space/server-kit';
import type { SandboxManager } from '../sandbox/sandbox-manager.js';
import type { NamedVolumes } from '../storage/named-volumes.js';

/** Tenants' volumes on this node and their snapshots: `/node/v1/named-volumes`, `/node/v1/volume-snapshots`. */
export function registerNamedVolumeRoutes(
  router: Router,
  namedVolumes: NamedVolumes,
  manager: Pick<SandboxManager, 'flushWrites'>,
  authorize: (ctx: { req: IncomingMessage }) => void,
): void {
  router.on('POST', '/node/v1/named-volumes', async (ctx) => {
    authorize(ctx);
    await namedVolumes.create(await readJson(ctx.req, NodeCreateVolumeRequestSchema));
    sendJson(ctx.res, 201, { ok: true });
  });

  router.on('DELETE', '/node/v1/named-volumes/:volumeId', async (ctx) => {
    authorize(ctx);
    await namedVolumes.delete(parseWith(VolumeIdSchema, ctx.params.volumeId, 'volume id'));
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('GET', '/node/v1/named-volumes/:volumeId/usage', async (ctx) => {
    authorize(ctx);
    sendJson(ctx.res, 200, { usage: await namedVolumes.usage(parseWith(VolumeIdSchema, ctx.params.volumeId, 'volume id')) });
  });

  router.on('POST', '/node/v1/named-volumes/:volumeId/snapshots', async (ctx) => {
    authorize(ctx);
    const volumeId = parseWith(VolumeIdSchema, ctx.params.volumeId, 'volume id');
    const { snapshotId, flushSession } = await readJson(ctx.req, NodeVolumeSnapshotRequestSchema);
    // The writer's sandbox caches file data: synced first, so the snapshot holds what it wrote.
    if (flushSession) await manager.flushWrites(flushSession);
    await namedVolumes.snapshot(volumeId, snapshotId);
    sendJson(ctx.res, 201, { ok: true });
  });

  router.on('POST', '/node/v1/named-volumes/:volumeId/restore', async (ctx) => {
    authorize(ctx);
    const volumeId = parseWith(VolumeIdSchema, ctx.params.volumeId, 'volume id');
    const { checkpointId, sourceVolumeId } = await readJson(ctx.req, NodeVolumeRestoreRequestSchema);
    await namedVolumes.restore(volumeId, checkpointId, sourceVolumeId);
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('DELETE', '/node/v1/volume-snapshots/:snapshotId', async (ctx) => {
    authorize(ctx);
    await namedVolumes.deleteSnapshot(parseWith(VolumeSnapshotIdSchema, ctx.params.snapshotId, 'volume snapshot id'));
    sendJson(ctx.res, 200, { ok: true });
  });
}
