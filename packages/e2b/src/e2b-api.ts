import type { IncomingMessage, ServerResponse } from 'node:http';
import { Limits } from '@space/protocol';
import { Space } from '@space/sdk';
import { lineLog, sendJson } from '@space/server-kit';
import { createControlApi } from './control-api.js';
import { sendE2bError, toE2bError } from './errors.js';
import { filesystemService } from './envd/filesystem-service.js';
import { serveEnvdHttp } from './envd/files-http.js';
import { codeInterpreterPort, serveCodeInterpreter } from './envd/code-interpreter.js';
import { connectHandler } from './envd/connect-handler.js';
import { processService } from './envd/process-service.js';
import type { SpaceFor } from './envd/sandbox-access.js';
import { PollingWatchers } from './envd/polling-watchers.js';
import { Filesystem } from './gen/filesystem_pb.js';
import { Process } from './gen/process_pb.js';

/** Where the API is mounted: `E2B_API_URL=http://HOST:PORT/e2b`, `E2B_SANDBOX_URL=http://HOST:PORT/e2b/sandbox`. */
export const e2bPrefix = '/e2b';
const sandboxPrefix = `${e2bPrefix}/sandbox`;

export interface E2bApiOptions {
  /** SPACE's own API, which every E2B call is translated onto (the control plane's URL, loopback). */
  apiUrl: () => string;
  log: (message: string) => void;
}

/**
 * E2B's API, served under `/e2b` by the control plane: the control API (sandboxes, timeouts,
 * pause, connect, fork, snapshots) and envd's data plane (Connect-RPC process and filesystem
 * services, `/files`, `/health`) under `/e2b/sandbox`. Nothing is kept here (but envd's polling
 * watchers, which live between polls by nature; see PollingWatchers): each call is
 * translated onto SPACE's public API with the caller's credentials (the API key from
 * `X-API-Key`, or the sandbox's access token, a session token), so every limit and every tenant
 * boundary of SPACE's API holds for E2B clients too.
 */
export interface E2bApi {
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** Ends what it holds between calls: envd's polling watchers. */
  close(): void;
}

export function createE2bApi(options: E2bApiOptions): E2bApi {
  // A 429 goes back to the E2B client as E2B's own (RateLimitError), not waited out here.
  const spaceFor: SpaceFor = (key) => new Space({ apiUrl: options.apiUrl(), apiKey: key, retry: false });
  const watchers = new PollingWatchers();
  const envdRpc = connectHandler({
    prefix: sandboxPrefix,
    log: options.log,
    readMaxBytes: Limits.maxStreamMessageBytes * 2,
    writeMaxBytes: Limits.maxStreamMessageBytes * 4,
    routes: (router) => {
      router.service(Process, processService(spaceFor));
      router.service(Filesystem, filesystemService(spaceFor, watchers));
    },
    // What envd does not serve: Connect's "unimplemented" (HTTP 404), for procedures and paths alike.
    fallback: (req, res) => sendJson(res, 404, { code: 'unimplemented', message: `${req.url?.slice(0, 200)} is not served by SPACE's envd API` }),
  });

  const control = createControlApi(e2bPrefix, spaceFor, lineLog(options.log));
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    try {
      const url = new URL(req.url ?? '/', 'http://local');
      if (url.pathname.startsWith(`${sandboxPrefix}/`) && req.headers['e2b-sandbox-port'] === codeInterpreterPort) {
        await serveCodeInterpreter(spaceFor, req, res, url.pathname.slice(sandboxPrefix.length));
        return;
      }
      if (url.pathname.startsWith(`${sandboxPrefix}/`)) {
        if (await serveEnvdHttp(spaceFor, req, res, url, url.pathname.slice(sandboxPrefix.length))) return;
        envdRpc(req, res);
        return;
      }
      await control.handle(req, res);
    } catch (err) {
      sendE2bError(res, toE2bError(err));
    }
  };
  return { handle, close: () => watchers.close() };
}
