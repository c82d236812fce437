import { randomUUID } from 'node:crypto';
import { type Tracer, activeSpan } from './tracing.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { ErrorCode, Limits, SpaceError, findRoute, matchPath } from '@space/protocol';
import { retryAfterOf, sendError, toSpaceError } from './respond.js';
import type { ServerLog } from './server-log.js';

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  params: Record<string, string>;
}

export interface UpgradeContext {
  req: IncomingMessage;
  url: URL;
  params: Record<string, string>;
}

export interface RouterOptions {
  /** Where protocol errors of WebSockets and the causes of 500s go. */
  log: ServerLog;
  /** Prefix of request ids, so a log line says which service answered (`cp`, `node`, `daemon`). */
  service: string;
  /**
   * Runs before any route: throws (e.g. TOO_MANY_REQUESTS) to refuse the request or stream, or
   * returns what to call when it is over (the response sent, the socket closed).
   */
  admit?: (req: IncomingMessage, kind: 'request' | 'stream') => Promise<() => void> | (() => void);
  /**
   * The API's route table: when given, a route, stream or proxy it does not declare (method and
   * path as written) is refused when registered, so nothing is served without its table entry
   * (schemas, docs). Mounted handlers answer for their own prefix.
   */
  table?: readonly { method: string; path: string }[];
  /**
   * How a request's error is answered, for an API of another shape (E2B's): its status (a 500 is
   * logged with its cause) and its reply. SPACE's `{error: {code, message}}` by default.
   */
  errors?: ErrorShape;
  /** Wraps the handler of a route as it is registered (e.g. idempotency keys on the routes whose table entry takes them). */
  around?: (method: string, path: string, handler: Handler) => Handler;
  /** Traces each request in a server span (named by its route), continuing the caller's traceparent. */
  tracer?: Tracer | null;
}

export interface ErrorShape {
  status(err: unknown): number;
  send(res: ServerResponse, err: unknown, requestId: string): void;
}

const spaceErrors: ErrorShape = { status: (err) => toSpaceError(err).status, send: sendError };

export type Handler = (ctx: RequestContext) => Promise<void> | void;
export type SocketHandler = (ws: WebSocket, ctx: UpgradeContext) => void;
/** Runs before a WebSocket upgrade is accepted; throw a SpaceError to refuse it with that status. */
export type UpgradeGuard = (ctx: UpgradeContext) => Promise<void> | void;

interface HttpRoute {
  method: string;
  path: string;
  handler: Handler;
}

interface MountedHandler {
  prefix: string;
  handler: (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;
}

/** Params of a request from its Host header (lowercased, port included), or null when the host is not one of the route's. */
export type HostMatcher = (host: string) => Record<string, string> | null;

/** A path whose requests of any method, and upgrades, are passed on to another server whole. */
export interface ProxyRoute {
  request: (ctx: RequestContext) => Promise<void>;
  upgrade: (ctx: UpgradeContext, socket: Duplex, head: Buffer) => Promise<void>;
}

interface SocketRoute {
  pattern: string;
  guard: UpgradeGuard;
  handler: SocketHandler;
}

/**
 * A request id: the service's prefix and 12 random hex digits, a UUID's first (`randomUUID` draws
 * from a pool of entropy Node.js keeps; `randomBytes` asks OpenSSL each time, 10x the cost).
 */
function newRequestId(service: string): string {
  return `${service}-${randomUUID().slice(0, 13).replace('-', '')}`;
}

/**
 * A small method + path router for node:http with WebSocket routes on the same server. Every
 * accepted WebSocket gets an error handler before anything else can run: a malformed frame (bad
 * UTF-8, a reserved opcode, an unmasked or oversized frame) closes that one connection with the
 * close code the protocol names for it, is logged, and nothing else notices.
 */
export class Router {
  private readonly routes: HttpRoute[] = [];
  private readonly socketRoutes: SocketRoute[] = [];
  private readonly mounted: MountedHandler[] = [];
  private readonly proxies: { pattern: string; route: ProxyRoute }[] = [];
  private readonly hostProxies: { match: HostMatcher; route: ProxyRoute }[] = [];
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: Limits.maxStreamMessageBytes * 2 });

  constructor(private readonly options: RouterOptions) {}

  on(method: string, path: string, handler: Handler): this {
    this.declared(method, path);
    this.routes.push({ method, path, handler: this.options.around?.(method, path, handler) ?? handler });
    return this;
  }

  /**
   * Hands every request under `prefix` to `handler`, which answers it whole (its own error shapes):
   * an API of another shape served by the same server. Admission runs first, as for routes.
   */
  mount(prefix: string, handler: MountedHandler['handler']): this {
    this.mounted.push({ prefix, handler });
    return this;
  }

  /** Requests of any method under `pattern` (which may end in `/*`), and its upgrades, go to `route`: a reverse proxy. */
  proxy(pattern: string, route: ProxyRoute): this {
    this.declared(null, pattern);
    this.proxies.push({ pattern, route });
    return this;
  }

  /**
   * Every request and upgrade whose Host header `match` accepts goes to `route`, whatever its path
   * (a host of its own, e.g. a preview URL's): `match` gives the route's params, `*` the path after `/`.
   */
  proxyHost(match: HostMatcher, route: ProxyRoute): this {
    this.hostProxies.push({ match, route });
    return this;
  }

  socket(pattern: string, guard: UpgradeGuard, handler: SocketHandler): this {
    this.declared('GET', pattern);
    this.socketRoutes.push({ pattern, guard, handler });
    return this;
  }

  /** Refuses a route missing from the table (`method` null: a proxy, any method). */
  private declared(method: string | null, path: string): void {
    const table = this.options.table;
    if (!table || table.some((r) => r.path === path && (method === null || r.method === method))) return;
    throw new Error(`${method ?? 'a proxy on'} ${path} is not in the API's route table: declare it there, with its schemas, first`);
  }

  readonly handle = (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const tracer = this.options.tracer;
    if (!tracer) return this.dispatch(req, res);
    return tracer.serve(`${req.method} ${this.options.service}`, req.headers, (span) => {
      if (span) {
        span.set('http.request.method', req.method ?? '');
        // Ended with the reply (a stream outlives the handler).
        res.once('close', () => {
          span.set('http.response.status_code', res.statusCode);
          span.end();
        });
      }
      return this.dispatch(req, res);
    });
  };

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = newRequestId(this.options.service);
    res.setHeader('x-request-id', requestId);
    try {
      const release = await this.options.admit?.(req, 'request');
      // The client may have gone while admission awaited: then 'close' has fired already.
      if (release) res.closed ? release() : res.once('close', release);
      const url = parseRequestUrl(req);
      const byHost = this.byHost(req, url);
      if (byHost) return await byHost.route.request({ req, res, url, params: byHost.params });
      const mount = this.mounted.find((m) => url.pathname === m.prefix || url.pathname.startsWith(`${m.prefix}/`));
      if (mount) {
        this.nameSpan(req, `${mount.prefix}/*`);
        return await mount.handler(req, res);
      }
      for (const { pattern, route } of this.proxies) {
        const params = matchPath(pattern, url.pathname);
        if (!params) continue;
        this.nameSpan(req, pattern);
        return await route.request({ req, res, url, params });
      }
      const found = findRoute(this.routes, req.method ?? '', url.pathname);
      if (found && 'route' in found) {
        this.nameSpan(req, found.route.path);
        return await found.route.handler({ req, res, url, params: found.params });
      }
      if (found) throw new SpaceError(ErrorCode.METHOD_NOT_ALLOWED, `${req.method} is not allowed on ${url.pathname}`);
      throw new SpaceError(ErrorCode.ROUTE_NOT_FOUND, `no route for ${req.method} ${url.pathname}`);
    } catch (err) {
      const errors = this.options.errors ?? spaceErrors;
      this.logIfInternal(err, errors.status(err), req, requestId);
      activeSpan()?.fail(err);
      errors.send(res, err, requestId);
    }
  }

  readonly handleUpgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const requestId = newRequestId(this.options.service);
    socket.on('error', () => socket.destroy());
    try {
      const release = await this.options.admit?.(req, 'stream');
      if (release) socket.destroyed ? release() : socket.once('close', release);
      const url = parseRequestUrl(req);
      const byHost = this.byHost(req, url);
      if (byHost) return await byHost.route.upgrade({ req, url, params: byHost.params }, socket, head);
      for (const { pattern, route } of this.proxies) {
        const params = matchPath(pattern, url.pathname);
        if (params) return await route.upgrade({ req, url, params }, socket, head);
      }
      for (const route of this.socketRoutes) {
        const params = matchPath(route.pattern, url.pathname);
        if (!params) continue;
        const ctx = { req, url, params };
        await route.guard(ctx);
        this.wss.handleUpgrade(req, socket, head, (ws) => {
          ws.on('error', (err: Error & { code?: string }) =>
            this.options.log.warn(`${requestId} ${url.pathname}: WebSocket closed on a protocol error: ${err.code ?? ''} ${err.message}`),
          );
          route.handler(ws, ctx);
        });
        return;
      }
      throw new SpaceError(ErrorCode.ROUTE_NOT_FOUND, `no WebSocket route for ${url.pathname}`);
    } catch (err) {
      const e = toSpaceError(err);
      this.logIfInternal(err, e.status, req, requestId);
      rejectUpgrade(socket, e, requestId);
    }
  };

  /** A traced request's span is named by its route's pattern, not its path (ids would make every name new). */
  private nameSpan(req: IncomingMessage, pattern: string): void {
    const span = activeSpan();
    if (span) span.name = `${req.method} ${pattern}`;
  }

  private byHost(req: IncomingMessage, url: URL): { route: ProxyRoute; params: Record<string, string> } | null {
    const host = req.headers.host;
    if (!host || this.hostProxies.length === 0) return null;
    for (const { match, route } of this.hostProxies) {
      const params = match(host.toLowerCase());
      if (params) return { route, params: { ...params, '*': url.pathname.slice(1) } };
    }
    return null;
  }

  /** A 500 is the server's own fault (never the client's): its cause goes to the log under the request id the client saw. */
  private logIfInternal(err: unknown, status: number, req: IncomingMessage, requestId: string): void {
    if (status === 500) this.options.log.error(`${requestId} ${req.method} ${(req.url ?? '').slice(0, 200)}: ${(err as Error)?.stack ?? String(err)}`);
  }
}

/** The request's URL; one that is too long or does not parse is the client's mistake. */
function parseRequestUrl(req: IncomingMessage): URL {
  const target = req.url ?? '/';
  if (target.length > Limits.maxUrlLength)
    throw new SpaceError(ErrorCode.URI_TOO_LONG, `request target of ${target.length} characters exceeds the limit of ${Limits.maxUrlLength}`);
  try {
    return new URL(target, 'http://local');
  } catch {
    throw new SpaceError(ErrorCode.VALIDATION_FAILED, 'the request target is not a valid URL path');
  }
}

function rejectUpgrade(socket: Duplex, e: SpaceError, requestId: string): void {
  const body = JSON.stringify(e.toBody(requestId));
  const retryAfter = retryAfterOf(e);
  socket.end(
    `HTTP/1.1 ${e.status} Error\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\n${retryAfter ? `retry-after: ${retryAfter}\r\n` : ''}connection: close\r\n\r\n${body}`,
  );
}
