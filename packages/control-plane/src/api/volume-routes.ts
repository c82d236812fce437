import { CreateVolumeRequestSchema, VolumeNameSchema, VolumeSnapshotIdSchema } from '@space/protocol';
import { type Router, parseWith, readJson, sendJson } from '@space/server-kit';
import type { Authenticator } from '../tenants/auth.js';
import type { VolumeService } from '../sessions/volume-service.js';

/** The tenant's volumes and their snapshots: /v1/volumes. */
export function registerVolumeRoutes(router: Router, auth: Authenticator, volumes: VolumeService): void {
  const nameOf = (params: Record<string, string>) => parseWith(VolumeNameSchema, params.name, 'volume name');

  router.on('POST', '/v1/volumes', async ({ req, res }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 201, await volumes.create(caller, await readJson(req, CreateVolumeRequestSchema)));
  });

  router.on('GET', '/v1/volumes', async ({ req, res }) => {
    sendJson(res, 200, { volumes: await volumes.list(await auth.authenticate(req)) });
  });

  router.on('GET', '/v1/volumes/:name', async ({ req, res, params }) => {
    sendJson(res, 200, await volumes.get(await auth.authenticate(req), nameOf(params)));
  });

  router.on('DELETE', '/v1/volumes/:name', async ({ req, res, params }) => {
    await volumes.delete(await auth.authenticate(req), nameOf(params));
    sendJson(res, 200, { ok: true });
  });

  router.on('POST', '/v1/volumes/:name/snapshots', async ({ req, res, params }) => {
    sendJson(res, 201, await volumes.snapshot(await auth.authenticate(req), nameOf(params)));
  });

  router.on('GET', '/v1/volumes/:name/snapshots', async ({ req, res, params }) => {
    sendJson(res, 200, { snapshots: await volumes.listSnapshots(await auth.authenticate(req), nameOf(params)) });
  });

  router.on('DELETE', '/v1/volumes/:name/snapshots/:snapshotId', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    await volumes.deleteSnapshot(caller, nameOf(params), parseWith(VolumeSnapshotIdSchema, params.snapshotId, 'volume snapshot id'));
    sendJson(res, 200, { ok: true });
  });
}
