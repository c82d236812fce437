import { nodeRoutes } from '@space/protocol';
import type { ServeRoute } from '@space/server-kit';
import type { SandboxManager } from '../sandbox/sandbox-manager.js';
import type { NamedVolumes } from '../storage/named-volumes.js';

/** Tenants' volumes on this node and their snapshots: `/node/v1/named-volumes`, `/node/v1/volume-snapshots`. */
export function registerNamedVolumeRoutes(serve: ServeRoute, namedVolumes: NamedVolumes, manager: Pick<SandboxManager, 'flushWrites'>): void {
  const ok = { ok: true } as const;
  serve(nodeRoutes.createNamedVolume, async ({ body }) => {
    await namedVolumes.create(body);
    return ok;
  });
  serve(nodeRoutes.deleteNamedVolume, async ({ params }) => {
    await namedVolumes.delete(params.volumeId);
    return ok;
  });
  serve(nodeRoutes.namedVolumeUsage, async ({ params }) => ({ usage: await namedVolumes.usage(params.volumeId) }));
  serve(nodeRoutes.snapshotNamedVolume, async ({ params, body }) => {
    // The writer's sandbox caches file data: synced first, so the snapshot holds what it wrote.
    if (body.flushSession) await manager.flushWrites(body.flushSession);
    await namedVolumes.snapshot(params.volumeId, body.snapshotId);
    return ok;
  });
  serve(nodeRoutes.restoreNamedVolume, async ({ params, body }) => {
    await namedVolumes.restore(params.volumeId, body.checkpointId, body.sourceVolumeId);
    return ok;
  });
  serve(nodeRoutes.deleteVolumeSnapshot, async ({ params }) => {
    await namedVolumes.deleteSnapshot(params.snapshotId);
    return ok;
  });
}
