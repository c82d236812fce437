import type { IncomingMessage } from 'node:http';
import { CreatePreviewTokenRequestSchema, ErrorCode, PreviewPortSchema, SpaceError, parsePreviewHost, previewHost } from '@space/protocol';
import { bearerToken, type ProxyRoute, type Router, parseWith, proxyRequest, proxyUpgrade, readJson, sendJson, type UpgradeContext } from '@space/server-kit';
import { type Authenticator, type Caller, consoleCookieName, isSpaceSubprotocol, requestCookies, webSocketKey } from '../tenants/auth.js';
import type { SessionCalls } from '../sessions/session-calls.js';
import type { SessionService } from '../sessions/session-service.js';
import type { Store } from '../store/store.js';

/** The query parameter and cookie a preview token comes in (a browser sends no Authorization header). */
/** The query parameter (and cookie) carrying a preview token. */
export const tokenName = 'space_token';
/** The client's own Authorization header, passed to the sandbox's server when SPACE's token came another way (the node's name for it). */
const forwardedAuthorization = 'x-space-forwarded-authorization';
/** How long the node waits for the port to listen: a declared service's port gets time to start (the node's name for it). */
const listenWait = 'x-space-listen-wait-ms';
const serviceStartWaitMs = 30_000;
/** Most public ports of a session (as at create). */
const maxPublicPorts = 16;
/**
 * Added to every answer of the path form, which is served on the API's and the console's origin: a
 * page of a tenant's app then runs in an opaque origin of its own, so it reads nothing of the
 * console's (its storage, its calls) nor of another session's previews (their cookies are not sent
 * for it), while its scripts, forms and pop-ups work. Apps that need an origin of their own
 * (cookies, storage, same-origin fetches) use the host form (`SPACE_PREVIEW_DOMAIN`).
 */
const pathFormAnswerHeaders = {
  'content-security-policy': 'sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals allow-downloads',
};
/** Headers E2B's clients send keys and tokens in (an app may use them for its own). */
const apiKeyHeaders = ['x-api-key', 'x-access-token'];
/** Client headers never passed on as they came: what is left of them without SPACE's credentials is set again (`withoutSpaceCredentials`). */
const credentialHeaders = ['sec-websocket-protocol', ...apiKeyHeaders];

interface PreviewAccess {
  caller: Caller;
  /** Headers for the node: the client's own Authorization when SPACE's token was not in it, cookies without SPACE's. */
  headers: Record<string, string>;
  /** Set on the answer: the token from the query, as a cookie for the page's later requests. */
  setCookie: string | null;
}

export interface PreviewOptions {
  /** `SPACE_PREVIEW_DOMAIN`: a wildcard domain pointing at the control planes; ports are also served at `<port>-<session>.<domain>`. */
  domain: string | null;
  /** `SPACE_PREVIEW_MAX_CONNECTIONS`: preview requests and WebSockets open at once per session in one control plane. */
  maxConnectionsPerSession: number;
}

/**
 * Preview URLs, in two forms: the path form `/v1/sessions/:id/ports/:port/<path>`, and with a
 * preview domain the host form `<port>-<id>.<domain>/<path>`. Any method and WebSocket upgrades
 * are passed to the port in the session's sandbox (resumed first if it has none: wake on request),
 * with `X-Forwarded-*` headers; the body is not rewritten, so an app served under the path form
 * should use relative links (its base path is in `X-Forwarded-Prefix`). Access: an API key
 * (`Authorization: Bearer`), or a preview token (`?space_token=`, then a cookie for that base
 * path). A session holds a bounded number of preview connections at once (slow clients cannot pile
 * up). Also the tokens and the list of listening ports.
 */
export function registerPortRoutes(
  router: Router,
  auth: Authenticator,
  sessions: SessionService,
  calls: SessionCalls,
  store: Store,
  options: PreviewOptions,
): void {
  /**
   * Who the request acts as. `pathForm`: its path in the path form, which keys and tokens are
   * checked against in either form. A public port needs neither: then an Authorization header that
   * is not one of SPACE's keys is the app's and passes through.
   */
  const access = async (req: IncomingMessage, url: URL, params: Record<string, string>, basePath: string, pathForm: string): Promise<PreviewAccess> => {
    const checked = pathForm === url.pathname ? req : withPath(req, pathForm);
    const fromQuery = url.searchParams.get(tokenName);
    const jar = requestCookies(req);
    const token = fromQuery ?? jar.get(tokenName) ?? null;
    const others = [...jar].filter(([name]) => name !== tokenName && name !== consoleCookieName).map(([name, value]) => `${name}=${value}`);
    const headers: Record<string, string> = {
      'x-forwarded-host': String(req.headers.host ?? ''),
      'x-forwarded-proto': String(req.headers['x-forwarded-proto'] ?? 'http'),
      'x-forwarded-for': [req.headers['x-forwarded-for'], req.socket.remoteAddress].filter(Boolean).join(', '),
      ...(basePath === '/' ? {} : { 'x-forwarded-prefix': basePath.slice(0, -1) }),
      ...(others.length > 0 ? { cookie: others.join('; ') } : {}),
    };
    await withoutSpaceCredentials(req, headers);
    if (token === null) {
      // A SPACE key is checked first (the usual case: no look at the port's publicity); without one,
      // or with another Authorization (the app's), only a public port lets the request through.
      const keyed = req.headers.authorization || webSocketKey(req) ? await auth.authenticate(checked).catch((err: unknown) => err as Error) : null;
      if (keyed && !(keyed instanceof Error)) return { caller: keyed, headers, setCookie: null };
      const publicCaller = await publicAccess(params);
      if (!publicCaller) return { caller: await auth.authenticate(checked), headers, setCookie: null };
      return { caller: publicCaller, headers, setCookie: null };
    }
    const caller = await auth.authenticateKey(token, checked);
    const setCookie = fromQuery ? `${tokenName}=${fromQuery}; Path=${basePath}; HttpOnly; SameSite=Lax` : null;
    return { caller, headers, setCookie };
  };
  /**
   * SPACE's credentials never reach the app, in any form and whichever of them authenticated the
   * request: an Authorization, X-API-Key or X-Access-Token header holding one of SPACE's keys or
   * tokens, and the `space`/`space-key.<key>` WebSocket subprotocols. The client's other values
   * are set in `headers` (the Authorization under the node's name for it); the node drops the
   * client's own `credentialHeaders`.
   */
  const withoutSpaceCredentials = async (req: IncomingMessage, headers: Record<string, string>): Promise<void> => {
    const bearer = bearerToken(req);
    if (req.headers.authorization && !(bearer && (await auth.isKnownKey(bearer)))) headers[forwardedAuthorization] = req.headers.authorization;
    for (const name of apiKeyHeaders) {
      const value = req.headers[name];
      if (typeof value === 'string' && !(await auth.isKnownKey(value.trim()))) headers[name] = value;
    }
    const subprotocols = String(req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p && !isSpaceSubprotocol(p));
    if (subprotocols.length > 0) headers['sec-websocket-protocol'] = subprotocols.join(', ');
  };
  /** The path and query after the port, without SPACE's token. */
  const rest = (url: URL, params: Record<string, string>): string => {
    const query = new URLSearchParams(url.search);
    query.delete(tokenName);
    const search = query.toString();
    return `/${params['*']}${search ? `?${search}` : ''}`;
  };
  const portOf = (params: Record<string, string>) => parseWith(PreviewPortSchema, params.port, 'port');
  /** The session's own tenant, when the port is public (anyone may reach it); else null. */
  const publicAccess = async (params: Record<string, string>): Promise<Caller | null> => {
    const session = await store.findSession(params.sessionId!);
    const port = Number(params.port);
    return session?.publicPorts.includes(port) ? { tenantId: session.tenantId, admin: false, sessionId: session.id } : null;
  };
  /** A port one of the session's services serves on may take a while to listen (the service starts with a resumed sandbox). */
  const waitLongerForServices = async (caller: Caller, sessionId: string, port: number, headers: Record<string, string>): Promise<void> => {
    if ((await sessions.row(caller, sessionId)).services.some((s) => s.port === port)) headers[listenWait] = String(serviceStartWaitMs);
  };
  const open = new ConnectionCounts(options.maxConnectionsPerSession);

  const pathFormBase = (params: Record<string, string>) => `/v1/sessions/${params.sessionId}/ports/${params.port}/`;
  /** The proxy of both forms; `basePath` is where the port's root is in the form's URLs. */
  const previewRoute = (basePathOf: (params: Record<string, string>) => string): ProxyRoute => ({
    request: async ({ req, res, url, params }) => {
      const sessionId = params.sessionId!;
      const basePath = basePathOf(params);
      const { caller, headers, setCookie } = await access(req, url, params, basePath, pathFormBase(params) + params['*']);
      const port = portOf(params);
      await waitLongerForServices(caller, sessionId, port, headers);
      const release = open.take(sessionId);
      res.once('close', release);
      if (setCookie) res.setHeader('set-cookie', setCookie);
      await calls.withSandbox(caller, sessionId, { repeatable: false, deadline: calls.deadline(req, res) }, (target) =>
        proxyRequest(
          req,
          res,
          target.node.portTarget(target.sandboxId, port, rest(url, params), headers, credentialHeaders),
          undefined,
          basePath === '/' ? {} : pathFormAnswerHeaders,
        ),
      );
    },
    upgrade: async ({ req, url, params }: UpgradeContext, socket, head) => {
      const sessionId = params.sessionId!;
      const { caller, headers } = await access(req, url, params, basePathOf(params), pathFormBase(params) + params['*']);
      const port = portOf(params);
      await waitLongerForServices(caller, sessionId, port, headers);
      socket.once('close', open.take(sessionId));
      await calls.withSandbox(caller, sessionId, { repeatable: false }, (target) =>
        proxyUpgrade(req, socket, head, target.node.portTarget(target.sandboxId, port, rest(url, params), headers, credentialHeaders)),
      );
      // An open connection is a call in progress: the session is not idle while it lasts.
      socket.once('close', calls.trackStream(sessionId));
    },
  });

  router.proxy('/v1/sessions/:sessionId/ports/:port/*', previewRoute(pathFormBase));
  const { domain } = options;
  if (domain)
    router.proxyHost(
      (host) => parsePreviewHost(host, domain),
      previewRoute(() => '/'),
    );

  router.on('GET', '/v1/sessions/:sessionId/ports', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, {
      ports: await calls.withSandbox(caller, params.sessionId!, { repeatable: true, deadline: calls.deadline(req, res) }, (target) =>
        target.node.listeningPorts(target.sandboxId),
      ),
    });
  });

  // Not under /ports/:port/, whose paths all belong to the sandbox's server.
  router.on('POST', '/v1/sessions/:sessionId/preview-tokens/:port', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    const port = portOf(params);
    const session = await sessions.row(caller, params.sessionId!);
    const { ttlSec } = await readJson(req, CreatePreviewTokenRequestSchema);
    const { token, expiresAt } = await auth.createPreviewToken(session.tenantId, session.id, port, ttlSec);
    const { pathBase, hostBase } = previewBases(req, url, session.id, port, domain);
    sendJson(res, 201, { token, expiresAt, url: `${pathBase}?${tokenName}=${token}`, hostUrl: hostBase && `${hostBase}?${tokenName}=${token}` });
  });

  // A public port: its preview URLs need no key or token (only the owner's key changes that).
  for (const [method, makePublic] of [
    ['PUT', true],
    ['DELETE', false],
  ] as const)
    router.on(method, '/v1/sessions/:sessionId/public-ports/:port', async ({ req, res, params }) => {
      const caller = await auth.authenticate(req);
      const port = portOf(params);
      await sessions.inTurn(caller, params.sessionId!, 'ports', async (row) => {
        const others = row.publicPorts.filter((p) => p !== port);
        if (makePublic && others.length >= maxPublicPorts) throw new SpaceError(ErrorCode.QUOTA_EXCEEDED, `a session may have ${maxPublicPorts} public ports`);
        await store.updateSession(row.id, { publicPorts: makePublic ? [...others, port].sort((a, b) => a - b) : others });
      });
      sendJson(res, 200, await sessions.get(caller, params.sessionId!));
    });

  router.on('DELETE', '/v1/sessions/:sessionId/preview-tokens/:port', async ({ req, res, params }) => {
    const session = await sessions.row(await auth.authenticate(req), params.sessionId!);
    sendJson(res, 200, { revoked: await auth.revokePreviewTokens(session.id, portOf(params)) });
  });
}

/**
 * Where a port's preview URLs start (each ends in `/`): the path form on the host the caller
 * reached, and the host form under the preview domain (null without one), which keeps the port the
 * control plane was reached on (none behind a load balancer on 80/443).
 */
export function previewBases(
  req: IncomingMessage,
  url: URL,
  sessionId: string,
  port: number,
  domain: string | null,
): { pathBase: string; hostBase: string | null } {
  const scheme = String(req.headers['x-forwarded-proto'] ?? 'http');
  const host = req.headers.host ?? url.host;
  return {
    pathBase: `${scheme}://${host}/v1/sessions/${sessionId}/ports/${port}/`,
    hostBase: domain ? `${scheme}://${previewHost(port, sessionId, domain)}${/:\d+$/.exec(host)?.[0] ?? ''}/` : null,
  };
}

/** The request as the key check sees it: at `path` (a host-form request checked as its path form). */
function withPath(req: IncomingMessage, path: string): IncomingMessage {
  return Object.assign(Object.create(req) as IncomingMessage, { url: path });
}

/** Preview connections open per session, each released once when it closes; past the bound a new one is refused (429). */
class ConnectionCounts {
  private readonly open = new Map<string, number>();

  constructor(private readonly max: number) {}

  take(sessionId: string): () => void {
    const count = this.open.get(sessionId) ?? 0;
    if (count >= this.max)
      throw new SpaceError(
        ErrorCode.TOO_MANY_REQUESTS,
        `session ${sessionId} has ${count} preview connections open, the most one control plane holds per session (SPACE_PREVIEW_MAX_CONNECTIONS)`,
        { limit: 'previewConnections', retryAfterSec: 1 },
      );
    this.open.set(sessionId, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(sessionId) ?? 1) - 1;
      if (left > 0) this.open.set(sessionId, left);
      else this.open.delete(sessionId);
    };
  }
}
