import type { IncomingMessage } from 'node:http';
import { CreatePreviewTokenRequestSchema, PreviewPortSchema } from '@space/protocol';
import { type Router, parseWith, proxyRequest, proxyUpgrade, readJson, sendJson, type UpgradeContext } from '@space/server-kit';
import { type Authenticator, type Caller, portScope } from '../auth.js';
import type { SessionCalls } from '../session-calls.js';
import type { SessionService } from '../session-service.js';
import type { Store } from '../store/store.js';

/** The query parameter and cookie a preview token comes in (a browser sends no Authorization header). */
const tokenName = 'space_token';
/** The client's own Authorization header, passed to the sandbox's server when SPACE's token came another way (the node's name for it). */
const forwardedAuthorization = 'x-space-forwarded-authorization';
/** How long the node waits for the port to listen: a declared service's port gets time to start (the node's name for it). */
const listenWait = 'x-space-listen-wait-ms';
const serviceStartWaitMs = 30_000;

function cookies(req: IncomingMessage): Map<string, string> {
  return new Map(
    String(req.headers.cookie ?? '')
      .split(';')
      .map((pair) => pair.trim().split('=') as [string, string])
      .filter(([name, value]) => name && value !== undefined),
  );
}

interface PreviewAccess {
  caller: Caller;
  /** Headers for the node: the client's own Authorization when SPACE's token was not in it, cookies without SPACE's. */
  headers: Record<string, string>;
  /** Set on the answer: the token from the query, as a cookie for the page's later requests. */
  setCookie: string | null;
}

/**
 * Preview URLs: `/v1/sessions/:id/ports/:port/<path>`, any method and WebSocket upgrades, passed
 * to the port in the session's sandbox (resumed first if it has none: wake on request), with
 * `X-Forwarded-*` headers; the body is not rewritten, so an app served here should use relative
 * links (its base path is in `X-Forwarded-Prefix`). Access: an API key (`Authorization: Bearer`),
 * or a preview token (`?space_token=`, then a cookie for that path). Also the tokens and the list
 * of listening ports.
 */
export function registerPortRoutes(router: Router, auth: Authenticator, sessions: SessionService, calls: SessionCalls, store: Store): void {
  const access = async (req: IncomingMessage, url: URL, sessionId: string, port: string): Promise<PreviewAccess> => {
    const fromQuery = url.searchParams.get(tokenName);
    const jar = cookies(req);
    const token = fromQuery ?? jar.get(tokenName) ?? null;
    const basePath = `/v1/sessions/${sessionId}/ports/${port}/`;
    const others = [...jar].filter(([name]) => name !== tokenName).map(([name, value]) => `${name}=${value}`);
    const headers: Record<string, string> = {
      'x-forwarded-host': String(req.headers.host ?? ''),
      'x-forwarded-proto': String(req.headers['x-forwarded-proto'] ?? 'http'),
      'x-forwarded-for': [req.headers['x-forwarded-for'], req.socket.remoteAddress].filter(Boolean).join(', '),
      'x-forwarded-prefix': basePath.slice(0, -1),
      ...(others.length > 0 ? { cookie: others.join('; ') } : {}),
    };
    if (token === null) return { caller: await auth.authenticate(req), headers, setCookie: null };
    if (req.headers.authorization) headers[forwardedAuthorization] = req.headers.authorization;
    const caller = await auth.authenticateKey(token, req);
    const setCookie = fromQuery ? `${tokenName}=${fromQuery}; Path=${basePath}; HttpOnly; SameSite=Lax` : null;
    return { caller, headers, setCookie };
  };
  /** The path and query after the port, without SPACE's token. */
  const rest = (url: URL, params: Record<string, string>): string => {
    const query = new URLSearchParams(url.search);
    query.delete(tokenName);
    const search = query.toString();
    return `/${params['*']}${search ? `?${search}` : ''}`;
  };
  const portOf = (params: Record<string, string>) => parseWith(PreviewPortSchema, params.port, 'port');
  /** A port one of the session's services serves on may take a while to listen (the service starts with a resumed sandbox). */
  const waitLongerForServices = async (caller: Caller, sessionId: string, port: number, headers: Record<string, string>): Promise<void> => {
    if ((await sessions.row(caller, sessionId)).services.some((s) => s.port === port)) headers[listenWait] = String(serviceStartWaitMs);
  };

  router.proxy('/v1/sessions/:sessionId/ports/:port/*', {
    request: async ({ req, res, url, params }) => {
      const { caller, headers, setCookie } = await access(req, url, params.sessionId!, params.port!);
      const port = portOf(params);
      await waitLongerForServices(caller, params.sessionId!, port, headers);
      if (setCookie) res.setHeader('set-cookie', setCookie);
      await calls.withSandbox(caller, params.sessionId!, { repeatable: false }, (target) =>
        proxyRequest(req, res, target.node.portTarget(target.sandboxId, port, rest(url, params), headers)),
      );
    },
    upgrade: async ({ req, url, params }: UpgradeContext, socket, head) => {
      const { caller, headers } = await access(req, url, params.sessionId!, params.port!);
      const port = portOf(params);
      await waitLongerForServices(caller, params.sessionId!, port, headers);
      await calls.withSandbox(caller, params.sessionId!, { repeatable: false }, (target) =>
        proxyUpgrade(req, socket, head, target.node.portTarget(target.sandboxId, port, rest(url, params), headers)),
      );
      // An open connection is a call in progress: the session is not idle while it lasts.
      socket.once('close', calls.trackStream(params.sessionId!));
    },
  });

  router.on('GET', '/v1/sessions/:sessionId/ports', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, {
      ports: await calls.withSandbox(caller, params.sessionId!, { repeatable: true }, (target) => target.node.listeningPorts(target.sandboxId)),
    });
  });

  // Not under /ports/:port/, whose paths all belong to the sandbox's server.
  router.on('POST', '/v1/sessions/:sessionId/preview-tokens/:port', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    const port = portOf(params);
    const session = await sessions.row(caller, params.sessionId!);
    const { ttlSec } = await readJson(req, CreatePreviewTokenRequestSchema);
    const { token, expiresAt } = await auth.createPreviewToken(session.tenantId, session.id, port, ttlSec);
    const origin = `${String(req.headers['x-forwarded-proto'] ?? 'http')}://${req.headers.host ?? url.host}`;
    sendJson(res, 201, { token, expiresAt, url: `${origin}/v1/sessions/${session.id}/ports/${port}/?${tokenName}=${token}` });
  });

  router.on('DELETE', '/v1/sessions/:sessionId/preview-tokens/:port', async ({ req, res, params }) => {
    const session = await sessions.row(await auth.authenticate(req), params.sessionId!);
    sendJson(res, 200, { revoked: await store.deleteScopedKeys(session.id, portScope(portOf(params))) });
  });
}
