// E2B's control API as one table of routes onto SPACE's API, with the translations they share: over ~300 lines because E2B's API is.
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import type { z } from 'zod';
import {
  E2bConnectSchema,
  E2bForkSchema,
  E2bListQuerySchema,
  E2bNetworkSchema,
  E2bNewSandboxSchema,
  E2bPauseSchema,
  E2bRefreshSchema,
  E2bResumeSchema,
  E2bSnapshotListQuerySchema,
  E2bSnapshotSchema,
  E2bTimeoutSchema,
  Limits,
  TemplateNameSchema,
} from '@space/protocol';
import { type EgressPolicy, isSpaceApiError, type Session, type SessionHandle, type Space } from '@space/sdk';
import { type ErrorShape, Router, type ServerLog, parseQuery, readBody, parseWith } from '@space/server-kit';
import { E2bError, sendE2bError, toE2bError } from './errors.js';
import { createdSandbox, e2bState, listedSandbox, sandboxDetail } from './sandbox-view.js';

type Reply = { status: number; body?: unknown; headers?: Record<string, string> };
type Handler = (ctx: { space: Space; params: Record<string, string>; url: URL; req: IncomingMessage }) => Promise<Reply>;

const noContent: Reply = { status: 204 };

/** A body as E2B clients send it (`{}` or nothing for "no options"), validated. */
async function body<S extends z.ZodTypeAny>(req: IncomingMessage, schema: S): Promise<z.output<S>> {
  const raw = await readBody(req, Limits.maxJsonBodyBytes);
  let value: unknown = {};
  if (raw.length > 0) {
    try {
      value = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new E2bError(400, 'the body is not valid JSON');
    }
  }
  return parseWith(schema, value, 'body');
}

/** E2B's egress settings as a SPACE egress policy: an allow-list of CIDRs and domains, or no internet. */
export function egressFromE2b(network: z.output<typeof E2bNetworkSchema>): Partial<EgressPolicy> {
  const allow = network.allowOut ?? [];
  const deny = network.denyOut ?? [];
  const denyAll = deny.some((d) => d === '0.0.0.0/0' || d === '::/0');
  if (deny.length > 0 && !denyAll) throw new E2bError(400, 'denyOut: SPACE denies all traffic ("0.0.0.0/0") or nothing; allow what is needed with allowOut');
  if (allow.length > 0) {
    const isCidr = (entry: string) => isIP(entry.split('/')[0]!) !== 0;
    const cidrs = allow.filter(isCidr).map((c) => (c.includes('/') ? c : `${c}/${c.includes(':') ? 128 : 32}`));
    return { mode: 'allow-list', cidrs, domains: allow.filter((entry) => !isCidr(entry)) };
  }
  if (denyAll || network.allow_internet_access === false) return { mode: 'deny-all', domains: [], cidrs: [] };
  return { mode: 'allow-all', domains: [], cidrs: [] };
}

/** Key=value pairs of E2B's `metadata` filter: URL-encoded pairs joined by `&`. */
function metadataFilter(encoded: string | undefined): [string, string][] {
  if (!encoded) return [];
  return [...new URLSearchParams(encoded)].map(([k, v]) => [decodeURIComponent(k), decodeURIComponent(v)]);
}

/** A page of `items` after `nextToken` (an offset, opaque to clients), with the token of the next page. */
function page<T>(items: T[], limit: number, nextToken: string | undefined): { items: T[]; headers: Record<string, string> } {
  const start = nextToken ? Number.parseInt(Buffer.from(nextToken, 'base64url').toString(), 10) : 0;
  if (!Number.isSafeInteger(start) || start < 0) throw new E2bError(400, 'nextToken is not one this API gave');
  const next: Record<string, string> = start + limit < items.length ? { 'x-next-token': Buffer.from(String(start + limit)).toString('base64url') } : {};
  return { items: items.slice(start, start + limit), headers: next };
}

/** Resumes the session when no sandbox serves it (any sandbox call does); the session as read before, and whether it had to. */
async function ensureRunning(handle: SessionHandle): Promise<{ session: Session; resumed: boolean }> {
  const session = await handle.refresh();
  await handle.processes();
  return { session, resumed: e2bState(session.data) === 'paused' };
}

async function connect(space: Space, id: string, timeout: number | undefined, autoPause?: boolean): Promise<Reply> {
  const handle = space.sessions.handle(id);
  const { session: before, resumed } = await ensureRunning(handle);
  // The reply names the sandbox by id and template, which a resume does not change: read again only when the timeout changes it.
  const session =
    timeout === undefined ? before : await handle.setTimeout(timeout, autoPause === undefined ? {} : { onTimeout: autoPause ? 'pause' : 'delete' });
  return { status: resumed ? 201 : 200, body: createdSandbox(session.data, await handle.createToken()) };
}

async function takeSnapshotCheckpoint(handle: SessionHandle): Promise<string> {
  try {
    return (await handle.checkpoint({ kind: 'full' })).id;
  } catch (err) {
    // Processes that cannot be saved now (a stream attached): the files are, in the fs checkpoint taken instead.
    const fallback = isSpaceApiError(err) ? err.details.fallbackCheckpointId : undefined;
    if (typeof fallback === 'string') return fallback;
    throw err;
  }
}

async function listSessions(space: Space, query: z.output<typeof E2bListQuerySchema>, defaultStates: string[]): Promise<Session[]> {
  const states = query.state ? query.state.split(',') : defaultStates;
  const wanted = metadataFilter(query.metadata);
  const startedAfter = query.startedAfter ? Date.parse(query.startedAfter) : null;
  const sessions = (await space.sessions.list()).filter(
    ({ data }) =>
      states.includes(e2bState(data)) &&
      wanted.every(([k, v]) => data.metadata[k] === v) &&
      (!query.template || data.template === query.template) &&
      (startedAfter === null || Date.parse(data.createdAt) > startedAfter),
  );
  if (query.order === 'desc') sessions.reverse();
  return sessions;
}

/** E2B's control API (paths as E2B's OpenAPI spec names them), each route onto SPACE's API. */
const routes: { method: string; path: string; handler: Handler }[] = [
  {
    method: 'POST',
    path: '/sandboxes',
    handler: async ({ space, req }) => createSandbox(space, await body(req, E2bNewSandboxSchema)),
  },
  {
    method: 'POST',
    path: '/v2/sandboxes',
    handler: async ({ space, req }) => createSandbox(space, await body(req, E2bNewSandboxSchema)),
  },
  {
    method: 'GET',
    path: '/sandboxes',
    handler: async ({ space, url }) => {
      const query = parseQuery(url, E2bListQuerySchema.pick({ metadata: true }).strict());
      const sessions = await listSessions(space, { ...query, limit: 0 }, ['running']);
      return { status: 200, body: sessions.map((s) => listedSandbox(s.data)) };
    },
  },
  {
    method: 'GET',
    path: '/v2/sandboxes',
    handler: async ({ space, url }) => {
      const query = parseQuery(url, E2bListQuerySchema.strict());
      const { items, headers } = page(await listSessions(space, query, ['running', 'paused']), query.limit, query.nextToken);
      return { status: 200, body: items.map((s) => listedSandbox(s.data)), headers };
    },
  },
  {
    method: 'GET',
    path: '/sandboxes/:id',
    handler: async ({ space, params }) => ({ status: 200, body: sandboxDetail((await space.sessions.get(params.id!)).data) }),
  },
  {
    method: 'DELETE',
    path: '/sandboxes/:id',
    handler: async ({ space, params }) => (await space.sessions.handle(params.id!).delete(), noContent),
  },
  {
    method: 'POST',
    path: '/sandboxes/:id/timeout',
    handler: async ({ space, params, req }) => {
      const { timeout } = await body(req, E2bTimeoutSchema);
      await space.sessions.handle(params.id!).setTimeout(timeout);
      return noContent;
    },
  },
  {
    method: 'POST',
    path: '/sandboxes/:id/refreshes',
    handler: async ({ space, params, req }) => {
      const { duration } = await body(req, E2bRefreshSchema);
      await space.sessions.handle(params.id!).setTimeout(duration ?? 15);
      return noContent;
    },
  },
  {
    method: 'POST',
    path: '/sandboxes/:id/pause',
    handler: async ({ space, params, req }) => {
      await body(req, E2bPauseSchema);
      try {
        await space.sessions.handle(params.id!).pause();
      } catch (err) {
        if (isSpaceApiError(err, 'SESSION_NOT_RUNNING')) throw new E2bError(409, `sandbox ${params.id} is already paused`);
        throw err;
      }
      return noContent;
    },
  },
  {
    method: 'POST',
    path: '/sandboxes/:id/resume',
    handler: async ({ space, params, req }) => {
      const { timeout, autoPause } = await body(req, E2bResumeSchema);
      if (e2bState((await space.sessions.get(params.id!)).data) === 'running') throw new E2bError(409, `sandbox ${params.id} is already running`);
      return connect(space, params.id!, timeout ?? 15, autoPause);
    },
  },
  {
    method: 'POST',
    path: '/sandboxes/:id/connect',
    handler: async ({ space, params, req }) => connect(space, params.id!, (await body(req, E2bConnectSchema)).timeout),
  },
  {
    method: 'POST',
    path: '/v2/sandboxes/:id/connect',
    handler: async ({ space, params, req }) => connect(space, params.id!, (await body(req, E2bConnectSchema)).timeout),
  },
  {
    method: 'POST',
    path: '/sandboxes/:id/fork',
    handler: async ({ space, params, req }) => {
      const { timeout, count } = await body(req, E2bForkSchema);
      const checkpointId = await takeSnapshotCheckpoint(space.sessions.handle(params.id!));
      const forks = await space.checkpoints.fork(checkpointId, { count });
      const results = await Promise.all(
        forks.map(async (fork) => {
          const session = timeout === undefined ? fork : await fork.setTimeout(timeout);
          return { sandbox: createdSandbox(session.data, await fork.createToken()) };
        }),
      );
      return { status: 201, body: results };
    },
  },
  {
    method: 'POST',
    path: '/sandboxes/:id/snapshots',
    handler: async ({ space, params, req }) => {
      const { name } = await body(req, E2bSnapshotSchema);
      const templateName = name
        ? parseWith(TemplateNameSchema, name, 'snapshot name')
        : `snap-${params.id!.replace(/^ses_/, '').slice(0, 20)}-${Date.now().toString(36)}`;
      const checkpointId = await takeSnapshotCheckpoint(space.sessions.handle(params.id!));
      const template = await space.templates.create({ name: templateName, fromCheckpoint: checkpointId });
      return { status: 201, body: { snapshotID: template.name, names: [template.name] } };
    },
  },
  {
    method: 'GET',
    path: '/snapshots',
    handler: async ({ space, url }) => {
      const query = parseQuery(url, E2bSnapshotListQuerySchema.strict());
      let templates = (await space.templates.list()).filter((t) => !t.builtIn && (!query.name || t.name === query.name));
      if (query.sandboxID) {
        const checkpoints = new Set((await space.sessions.handle(query.sandboxID).checkpoints()).map((c) => c.id));
        templates = templates.filter((t) => t.fromCheckpoint && checkpoints.has(t.fromCheckpoint));
      }
      const { items, headers } = page(templates, query.limit, query.nextToken);
      return { status: 200, body: items.map((t) => ({ snapshotID: t.name, names: [t.name] })), headers };
    },
  },
  {
    method: 'DELETE',
    path: '/templates/:id',
    handler: async ({ space, params }) => (await space.templates.delete(params.id!), noContent),
  },
  {
    method: 'GET',
    path: '/sandboxes/:id/metrics',
    handler: async ({ space, params }) => {
      // One sample, taken now; a paused sandbox has none (and is not resumed to give one).
      const m = await space.sessions
        .handle(params.id!)
        .metrics()
        .catch((err) => {
          if (isSpaceApiError(err, 'SESSION_NOT_RUNNING')) return null;
          throw err;
        });
      if (!m) return { status: 200, body: [] };
      const metric = {
        timestamp: m.sampledAt,
        timestampUnix: Math.floor(Date.parse(m.sampledAt) / 1000),
        cpuCount: m.cpuCount,
        cpuUsedPct: m.cpuUsedPct,
        memUsed: m.memoryBytes,
        memTotal: m.memoryLimitBytes ?? 0,
        diskUsed: m.diskBytes ?? 0,
        diskTotal: m.diskLimitBytes ?? 0,
      };
      return { status: 200, body: [metric] };
    },
  },
  {
    method: 'PUT',
    path: '/sandboxes/:id/network',
    handler: async ({ space, params, req }) => {
      await space.sessions.handle(params.id!).setEgress(egressFromE2b(await body(req, E2bNetworkSchema)));
      return noContent;
    },
  },
];

/**
 * E2B Desktop's stream port: its SDK hands `https://6080-<id>.<domain>/vnc.html` to browsers with no
 * way to carry a token, so in a `desktop` sandbox this one port is public, as E2B's ports are unless
 * `allowPublicTraffic: false` (its `stream.start({requireAuth: true})` puts a VNC password on it).
 */
const e2bDesktopStreamPort = 6080;

async function createSandbox(space: Space, request: z.output<typeof E2bNewSandboxSchema>): Promise<Reply> {
  const network = request.network ?? (request.allow_internet_access === undefined ? undefined : { allow_internet_access: request.allow_internet_access });
  const desktopStream = request.templateID === 'desktop' && network?.allowPublicTraffic !== false;
  const session = await space.sessions.create({
    template: request.templateID,
    ...(desktopStream ? { publicPorts: [e2bDesktopStreamPort] } : {}),
    env: request.envVars ?? {},
    metadata: request.metadata ?? {},
    ...(network ? { egress: egressFromE2b(network) } : {}),
    ...(request.timeout > 0 ? { timeoutSec: request.timeout } : {}),
    onTimeout: request.autoPause ? 'pause' : 'delete',
  });
  return { status: 201, body: createdSandbox(session.data, await session.createToken()) };
}

/** E2B's error shape for the router: `{code, message}` with E2B's statuses, SPACE's error code in the message. */
const e2bErrors: ErrorShape = {
  status: (err) => toE2bError(err).status,
  send: (res, err) => sendE2bError(res, toE2bError(err)),
};

/**
 * E2B's control API under `prefix`, on server-kit's router: each route is answered with `space`
 * for the caller's key (`X-API-Key`), in E2B's shapes.
 */
export function createControlApi(prefix: string, spaceFor: (key: string) => Space, log: ServerLog): Router {
  const router = new Router({ log, service: 'e2b', errors: e2bErrors });
  for (const route of routes) {
    router.on(route.method, prefix + route.path, async ({ req, res, url, params }) => {
      const key = req.headers['x-api-key'];
      if (typeof key !== 'string' || key.length === 0 || key.length > 512)
        throw new E2bError(401, 'missing API key: send "X-API-Key: <key>" (a SPACE API key; E2B_API_KEY in E2B clients)');
      const reply = await route.handler({ space: spaceFor(key), params, url, req });
      const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
      res.writeHead(reply.status, { ...reply.headers, ...(text ? { 'content-type': 'application/json' } : {}), 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  }
  return router;
}
