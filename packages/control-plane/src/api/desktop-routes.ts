import { DesktopStreamRequestSchema, type DesktopStream } from '@space/protocol';
import { type Router, readJson, sendJson } from '@space/server-kit';
import type { Authenticator } from '../tenants/auth.js';
import type { SessionCalls } from '../sessions/session-calls.js';
import type { SessionService } from '../sessions/session-service.js';
import { previewBases, tokenName } from './port-routes.js';

/**
 * `POST /v1/sessions/:id/desktop/stream`: a live view of the session's desktop for people. The
 * sandbox's desktop server starts x11vnc (view-only unless asked) and noVNC; the answer is noVNC's
 * page through the session's preview URLs with a preview token for that port only, its WebSocket
 * path carrying the token too (a path-form page runs in an opaque origin: no cookie goes along).
 * The rest of the desktop API is the sandbox route table's (`/desktop/*`).
 */
export function registerDesktopRoutes(router: Router, auth: Authenticator, sessions: SessionService, calls: SessionCalls, domain: string | null): void {
  router.on('POST', '/v1/sessions/:sessionId/desktop/stream', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    const { viewOnly, ttlSec } = await readJson(req, DesktopStreamRequestSchema);
    const session = await sessions.row(caller, params.sessionId!);
    const vnc = await calls.withSandbox(caller, session.id, { repeatable: true, deadline: calls.deadline(req, res) }, (target) =>
      target.node.sandboxDesktopVnc(target.sandboxId, viewOnly),
    );
    const { token, expiresAt } = await auth.createPreviewToken(session.tenantId, session.id, vnc.port, ttlSec);
    const { pathBase, hostBase } = previewBases(req, url, session.id, vnc.port, domain);
    const stream: DesktopStream = {
      url: noVncPage(pathBase, token, viewOnly),
      hostUrl: hostBase && noVncPage(hostBase, token, viewOnly),
      viewOnly,
      expiresAt,
    };
    sendJson(res, 201, stream);
  });
}

/** noVNC's page under a preview base, told to connect at once, scale to the window, and where its WebSocket is (with the token). */
function noVncPage(base: string, token: string, viewOnly: boolean): string {
  const socketPath = `${new URL(base).pathname.slice(1)}websockify?${tokenName}=${token}`;
  const query = new URLSearchParams({
    [tokenName]: token,
    autoconnect: '1',
    resize: 'scale',
    reconnect: '1',
    view_only: viewOnly ? '1' : '0',
    path: socketPath,
  });
  return `${base}vnc.html?${query}`;
}
