import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { z } from 'zod';
import { SandboxPathSchema } from '@space/protocol';
import { parseQuery, readBody, sendJson } from '@space/server-kit';
import { E2bError, toE2bError } from '../errors.js';
import { type SpaceFor, sandboxSession } from './sandbox-access.js';

/** A multipart upload is read whole before it is written: this bounds it. Larger files go as one streamed `application/octet-stream` upload each (the SDK does so for streams). */
const maxMultipartBytes = 64 * 1024 * 1024;

const FilesQuerySchema = z.object({ path: SandboxPathSchema.optional(), username: z.string().max(64).optional() }).strict();

/**
 * envd's HTTP routes under `/e2b/sandbox`: `GET /files` (download), `POST /files` (multipart
 * upload of one or more files, or one raw `application/octet-stream` body) and `GET /health`.
 * Errors are envd's `{code, message}`.
 */
export async function serveEnvdHttp(spaceFor: SpaceFor, req: IncomingMessage, res: ServerResponse, url: URL, path: string): Promise<boolean> {
  const route = `${req.method} ${path}`;
  if (route !== 'GET /files' && route !== 'POST /files' && route !== 'GET /health') return false;
  try {
    const sandbox = sandboxSession((name) => req.headers[name] as string | undefined, spaceFor);
    if (route === 'GET /health') {
      await sandbox.refresh();
      res.writeHead(204).end();
      return true;
    }
    const query = parseQuery(url, FilesQuerySchema);
    if (route === 'GET /files') {
      if (!query.path) throw new E2bError(400, 'path is required');
      const body = await sandbox.files.download(query.path);
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      await pipeline(body, res);
      return true;
    }
    if ((req.headers['content-type'] ?? '').startsWith('application/octet-stream')) {
      if (!query.path) throw new E2bError(400, 'path is required');
      const encoding = req.headers['content-encoding'];
      if (encoding && encoding !== 'gzip' && encoding !== 'identity') throw new E2bError(415, `content-encoding ${encoding} is not supported (gzip is)`);
      // A body that is not gzip fails the upload as a broken stream: it is the client's mistake, not SPACE unreachable.
      let undecodable: Error | null = null;
      const body = encoding === 'gzip' ? req.pipe(createGunzip()).once('error', (err) => (undecodable = err)) : req;
      const entry = await sandbox.files.upload(query.path, body).catch((err: unknown) => {
        throw undecodable ? new E2bError(400, `the body is not gzip (${(undecodable as Error).message}); nothing was written`) : err;
      });
      sendJson(res, 200, [{ name: entry.name, type: 'file', path: entry.path }]);
      return true;
    }
    const form = await new Response(new Uint8Array(await readBody(req, maxMultipartBytes)), { headers: { 'content-type': req.headers['content-type'] ?? '' } })
      .formData()
      .catch(() => {
        throw new E2bError(400, 'the body is not multipart/form-data with "file" parts');
      });
    const files = form.getAll('file').filter((part): part is File => typeof part !== 'string');
    if (files.length === 0) throw new E2bError(400, 'no "file" part in the upload');
    const written = [];
    for (const file of files) {
      const target = files.length === 1 && query.path ? query.path : file.name;
      const entry = await sandbox.files.write(target, new Uint8Array(await file.arrayBuffer()));
      written.push({ name: entry.name, type: 'file', path: entry.path });
    }
    sendJson(res, 200, written);
  } catch (err) {
    const e = toE2bError(err);
    if (res.headersSent) res.destroy();
    else sendJson(res, e.status, { code: e.status, message: e.message });
  }
  return true;
}
