import { CheckpointDiffQuerySchema, CheckpointIdSchema, FileDiffQuerySchema, PathQuerySchema, PathRestoreRequestSchema } from '@space/protocol';
import { type Router, parseQuery, parseWith, readJson, sendJson } from '@space/server-kit';
import type { Authenticator } from '../tenants/auth.js';
import type { CheckpointFileReader } from '../sessions/checkpoint-file-reader.js';
import type { PathRestorer } from '../sessions/path-restorer.js';

/** A checkpoint's files without a sandbox (/v1/checkpoints/:id/files…), a diff of two checkpoints, a path's history across a session's checkpoints, and a path put back. */
export function registerCheckpointFileRoutes(router: Router, auth: Authenticator, files: CheckpointFileReader, restorer: PathRestorer): void {
  const checkpointOf = (params: Record<string, string>) => parseWith(CheckpointIdSchema, params.checkpointId, 'checkpoint id');

  router.on('GET', '/v1/checkpoints/:checkpointId/files', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    await files.download(caller, checkpointOf(params), parseQuery(url, PathQuerySchema).path, res);
  });

  router.on('GET', '/v1/checkpoints/:checkpointId/files/list', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, await files.list(caller, checkpointOf(params), parseQuery(url, PathQuerySchema).path));
  });

  router.on('GET', '/v1/checkpoints/:checkpointId/files/stat', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, await files.stat(caller, checkpointOf(params), parseQuery(url, PathQuerySchema).path));
  });

  router.on('GET', '/v1/checkpoints/:checkpointId/diff', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, await files.diff(caller, checkpointOf(params), parseQuery(url, CheckpointDiffQuerySchema)));
  });

  router.on('GET', '/v1/checkpoints/:checkpointId/diff/file', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, await files.fileDiff(caller, checkpointOf(params), parseQuery(url, FileDiffQuerySchema)));
  });

  router.on('POST', '/v1/sessions/:sessionId/files/restore', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, await restorer.restore(caller, params.sessionId!, await readJson(req, PathRestoreRequestSchema)));
  });

  router.on('GET', '/v1/sessions/:sessionId/files/history', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, await files.history(caller, params.sessionId!, parseQuery(url, PathQuerySchema).path));
  });
}
