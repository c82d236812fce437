import {
  AttachQuerySchema,
  DaemonRebindRequestSchema,
  ErrorCode,
  ExecRequestSchema,
  Limits,
  MkdirRequestSchema,
  MoveRequestSchema,
  PathQuerySchema,
  PtyStartSchema,
  ExecStreamStartSchema,
  RemoveQuerySchema,
  SignalRequestSchema,
  SpaceError,
  type ExecResult,
} from '@space/protocol';
import {
  Router,
  type ServerLog,
  bearerToken,
  closeWithError,
  parseQuery,
  parseWith,
  readJson,
  secretsEqual,
  sendJson,
  type UpgradeContext,
} from '@space/server-kit';
import type { FileService } from './file-service.js';
import type { ProcessTable } from './process-table.js';
import { bindProcessSocket, onFirstMessage } from './process-socket.js';
import { bindWatchSocket } from './watch-socket.js';
import { collectOutput } from './collect-output.js';
import type { SandboxPaths } from './sandbox-paths.js';
import type { DaemonChannel } from './daemon-channel.js';
import { applySandboxIdentity } from './sandbox-identity.js';

/** The channel token; replaced when a daemon restored from a memory image is bound to its new sandbox. */
export interface ChannelCredentials {
  token: string;
}

export interface DaemonDeps {
  credentials: ChannelCredentials;
  channel: DaemonChannel;
  processes: ProcessTable;
  files: FileService;
  paths: SandboxPaths;
  log: ServerLog;
}

/** The daemon's API: the table in @space/protocol `sandboxRoutes`, behind the node agent's token. */
export function createDaemonRouter(deps: DaemonDeps): Router {
  const { processes, files } = deps;
  const authorize = (req: { headers: Record<string, unknown> }): void => {
    const token = bearerToken(req as never);
    if (!token || !secretsEqual(token, deps.credentials.token)) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'daemon channel token missing or wrong');
  };
  const guard = (ctx: UpgradeContext): void => authorize(ctx.req);
  const router = new Router({ log: deps.log, service: 'daemon' });
  const on = (method: string, pattern: string, handler: Parameters<Router['on']>[2]): void => {
    router.on(method, pattern, async (ctx) => {
      authorize(ctx.req);
      await handler(ctx);
    });
  };

  on('GET', '/health', ({ res }) => sendJson(res, 200, { ok: true }));

  // Node agent only (not in sandboxRoutes, so never relayed): around full checkpoints and restores.
  on('POST', '/quiesce', ({ req, res }) => {
    const blockers = deps.channel.blockers();
    if (blockers.length > 0) throw new SpaceError(ErrorCode.FULL_CHECKPOINT_REFUSED, `cannot save this sandbox's memory now: ${blockers.join('; ')}`);
    deps.channel.quiesce(req.socket as import('node:net').Socket);
    sendJson(res, 200, { daemonPid: process.pid });
  });

  on('POST', '/rebind', async ({ req, res }) => {
    const body = await readJson(req, DaemonRebindRequestSchema);
    if (body.identity) await applySandboxIdentity(body.identity);
    processes.setSessionEnv(body.env);
    if (body.newSession) processes.forgetFinished();
    deps.credentials.token = body.token;
    sendJson(res, 200, { ok: true });
  });

  on('POST', '/exec', async ({ req, res }) => {
    const body = await readJson(req, ExecRequestSchema);
    const proc = processes.start(body);
    if (body.background) {
      proc.endStdin();
      return sendJson(res, 200, { pid: proc.pid });
    }
    if (body.stdin !== undefined) proc.write(Buffer.from(body.stdin, 'utf8'));
    proc.endStdin();
    const started = Date.now();
    const result: ExecResult = await collectOutput(proc, Limits.maxBufferedOutputBytes);
    sendJson(res, 200, { ...result, durationMs: Date.now() - started });
  });

  on('GET', '/processes', ({ res }) => sendJson(res, 200, { processes: processes.list() }));

  on('POST', '/processes/:pid/signal', async ({ req, res, params }) => {
    const { signal } = await readJson(req, SignalRequestSchema);
    processes.get(Number(params.pid)).kill(signal);
    sendJson(res, 200, { ok: true });
  });

  on('GET', '/files', async ({ res, url }) => {
    const { path } = parseQuery(url, PathQuerySchema);
    const { stream, size } = await files.openRead(path);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
    stream.on('error', (err) => res.destroy(err));
    stream.pipe(res);
  });

  on('PUT', '/files', async ({ req, res, url }) => {
    const { path } = parseQuery(url, PathQuerySchema);
    sendJson(res, 200, await files.write(path, req, Limits.maxUploadBytes));
  });

  on('DELETE', '/files', async ({ res, url }) => {
    const { path, recursive } = parseQuery(url, RemoveQuerySchema);
    await files.remove(path, { recursive: recursive === 'true' });
    sendJson(res, 200, { ok: true });
  });

  on('GET', '/files/list', async ({ res, url }) => sendJson(res, 200, await files.list(parseQuery(url, PathQuerySchema).path)));
  on('GET', '/files/stat', async ({ res, url }) => sendJson(res, 200, await files.stat(parseQuery(url, PathQuerySchema).path)));

  on('POST', '/files/mkdir', async ({ req, res }) => {
    const body = await readJson(req, MkdirRequestSchema);
    await files.mkdir(body.path, { recursive: body.recursive ?? true });
    sendJson(res, 200, { ok: true });
  });

  on('POST', '/files/move', async ({ req, res }) => {
    const body = await readJson(req, MoveRequestSchema);
    await files.move(body.from, body.to, { overwrite: body.overwrite ?? false });
    sendJson(res, 200, { ok: true });
  });

  router.socket('/exec/stream', guard, (ws) => {
    onFirstMessage(ws, 10_000, (raw) => {
      try {
        const start = parseWith(ExecStreamStartSchema, raw, 'start message');
        bindProcessSocket(ws, processes.start(start));
      } catch (err) {
        reportSocketError(ws, err);
      }
    });
  });

  router.socket('/pty', guard, (ws) => {
    onFirstMessage(ws, 10_000, (raw) => {
      try {
        const start = parseWith(PtyStartSchema, raw, 'start message');
        const cmd = start.cmd ?? ['/bin/sh', '-l'];
        const proc = processes.start({ cmd, cwd: start.cwd, env: start.env, timeoutMs: Limits.maxExecTimeoutMs, pty: { cols: start.cols, rows: start.rows } });
        bindProcessSocket(ws, proc);
      } catch (err) {
        reportSocketError(ws, err);
      }
    });
  });

  router.socket('/processes/:pid/attach', guard, (ws, ctx) => {
    try {
      const { after } = parseQuery(ctx.url, AttachQuerySchema);
      bindProcessSocket(ws, processes.get(Number(ctx.params.pid)), { replay: true, after });
    } catch (err) {
      reportSocketError(ws, err);
    }
  });

  router.socket('/files/watch', guard, (ws, ctx) => {
    try {
      const { path } = parseQuery(ctx.url, PathQuerySchema);
      bindWatchSocket(ws, deps.paths.resolve(path), path);
    } catch (err) {
      reportSocketError(ws, err);
    }
  });

  return router;
}

function reportSocketError(ws: import('ws').WebSocket, err: unknown): void {
  const e = err instanceof SpaceError ? err : new SpaceError(ErrorCode.VALIDATION_FAILED, (err as Error)?.message ?? String(err));
  closeWithError(ws, e.code, e.message);
}
