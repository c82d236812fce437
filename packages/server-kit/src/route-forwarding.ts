import { Limits, type SandboxRoute, routeUrl } from '@space/protocol';
import { parseQuery, parseWith, readJson } from './body.js';
import { relayEvents } from './event-relay.js';
import { sendJson } from './respond.js';
import type { RequestContext } from './router.js';
import type { Upstream } from './upstream.js';

export type HttpSandboxRoute = Exclude<SandboxRoute, { kind: 'websocket' }>;

/** Exec replies carry up to two buffered streams, JSON-escaped: bounded well above that, still bounded. */
const execReplyLimit = Limits.maxBufferedOutputBytes * 2 * 6 + 64 * 1024;

/** Validates a sandbox route's path params, query and JSON body at the boundary, before anything is forwarded. */
export async function readRouteInput(route: HttpSandboxRoute, ctx: RequestContext): Promise<{ body: unknown }> {
  if ('params' in route && route.params) parseWith(route.params, pathParams(route, ctx.params), 'path');
  if ('query' in route && route.query) parseQuery(ctx.url, route.query);
  const body = (route.kind === 'json' || route.kind === 'events') && route.body ? await readJson(ctx.req, route.body) : undefined;
  return { body };
}

/** The params a route's path names (the request's params also hold the layer's own, such as the session id). */
function pathParams(route: HttpSandboxRoute, params: Record<string, string>): Record<string, string> {
  const names = [...route.path.matchAll(/:([a-zA-Z]+)/g)].map((m) => m[1]!);
  return Object.fromEntries(names.map((name) => [name, params[name] ?? '']));
}

/** Replaces `:name` segments of a route with the request's params. */
export function routePath(route: SandboxRoute, params: Record<string, string>): string {
  return routeUrl(route, params);
}

/**
 * How long an exec's daemon may take to answer past the exec's own timeout: it kills the process at
 * that timeout and answers (what the process left running delays the answer by 0.5 s at most).
 */
const execAnswerGraceMs = 15_000;

/** How long the in-sandbox agent may take to answer any other bounded JSON call (a process list, a file's stat, a directory made): generous. */
const otherAnswerBoundMs = 60_000;

/**
 * The longest the in-sandbox agent takes to answer this call when it answers at all, or undefined
 * when the call has no such bound (a stream, an upload or a download lasts as long as its content;
 * a JSON route the table marks `unbounded` as long as its work): an exec by its timeout (a
 * background one at once), any other JSON call within `otherAnswerBoundMs`. A daemon silent past it
 * is not answering (stopped, hung, its sandbox wedged).
 */
export function daemonAnswerBoundMs(route: HttpSandboxRoute, body: unknown): number | undefined {
  if (route.kind !== 'json' || route.unbounded) return undefined;
  if (route.path !== '/exec') return otherAnswerBoundMs;
  const { timeoutMs, background } = body as { timeoutMs?: number; background?: boolean };
  return (background ? 0 : (timeoutMs ?? Limits.defaultExecTimeoutMs)) + execAnswerGraceMs;
}

/**
 * Forwards one validated sandbox operation to the layer below at `targetPath` and relays the reply,
 * whose JSON is checked against the route's response schema and bounded in size (an event stream:
 * each event; resolves with its final event, or null when it had none). `headers` go with the
 * request; with `answerWithinMs`, a JSON reply not begun by then fails with the layer's
 * "unreachable" code.
 */
export async function forwardRoute(
  route: HttpSandboxRoute,
  ctx: RequestContext,
  input: { body: unknown },
  upstream: Upstream,
  targetPath: string,
  headers: Record<string, string> = {},
  answerWithinMs?: number,
): Promise<unknown> {
  const target = targetPath + ctx.url.search;
  switch (route.kind) {
    case 'json': {
      const limit = route.path === '/exec' ? execReplyLimit : 16 * 1024 * 1024;
      const timeout = answerWithinMs === undefined ? {} : { timeoutMs: answerWithinMs };
      return sendJson(ctx.res, 200, await upstream.json(route.method, target, input.body, route.response, { limit, headers, ...timeout }));
    }
    case 'download':
      return upstream.download(target, ctx.res, headers, { contentType: route.contentType, maxBytes: route.maxBytes });
    case 'upload': {
      const uploadHeaders: Record<string, string> = { ...headers, 'content-type': 'application/octet-stream' };
      const length = ctx.req.headers['content-length'];
      if (typeof length === 'string') uploadHeaders['content-length'] = length;
      const reply = await upstream.send('PUT', target, ctx.req, uploadHeaders);
      return sendJson(ctx.res, 200, await upstream.readJsonReply(reply, route.response, 64 * 1024));
    }
    case 'events': {
      // A caller that leaves before the layer below answers ends the request there too (a cell that prints nothing yet).
      const left = new AbortController();
      ctx.res.once('close', () => left.abort());
      const reply = await upstream.send(route.method, target, Buffer.from(JSON.stringify(input.body)), headers, undefined, left.signal);
      if (reply.statusCode !== 200) throw await upstream.errorFrom(reply);
      return relayEvents(reply, ctx.res, route.stream, {
        maxEventBytes: Limits.maxCodeEventBytes,
        maxTotalBytes: Limits.maxCellOutputBytes,
        label: upstream.label,
      });
    }
  }
}
