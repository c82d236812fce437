import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConsoleSignInRequestSchema, ErrorCode, SpaceError } from '@space/protocol';
import { readJson, sendJson } from '@space/server-kit';
import { type Authenticator, consoleCookieName } from '../tenants/auth.js';

/** Where the console signs in (POST) and out (DELETE). */
const consoleSessionPath = '/console/session';

/**
 * The console's sign-in: the key is checked, then kept in an HttpOnly, SameSite=Strict cookie that
 * no script can read (a page of a tenant's app on this origin could read sessionStorage), `Secure`
 * behind TLS. Everything else under /console is its static files (`files`).
 */
export function consoleWithSignIn(
  auth: Authenticator,
  files: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const cookie = (req: IncomingMessage, value: string, maxAgeSec?: number): string =>
    [
      `${consoleCookieName}=${value}`,
      'Path=/',
      'HttpOnly',
      'SameSite=Strict',
      ...(req.headers['x-forwarded-proto'] === 'https' ? ['Secure'] : []),
      ...(maxAgeSec !== undefined ? [`Max-Age=${maxAgeSec}`] : []),
    ].join('; ');
  return async (req, res) => {
    if (new URL(req.url ?? '/', 'http://console.invalid').pathname !== consoleSessionPath) return files(req, res);
    if (req.method === 'DELETE') {
      res.setHeader('set-cookie', cookie(req, '', 0));
      return sendJson(res, 200, { signedIn: false });
    }
    if (req.method !== 'POST') throw new SpaceError(ErrorCode.METHOD_NOT_ALLOWED, `${req.method} is not allowed on ${consoleSessionPath}`);
    const { key } = await readJson(req, ConsoleSignInRequestSchema);
    const caller = await auth.authenticateKey(key, req);
    if (caller.sessionId) throw new SpaceError(ErrorCode.FORBIDDEN, "the console signs in with a tenant's API key, not a session or preview token");
    res.setHeader('set-cookie', cookie(req, key));
    sendJson(res, 200, { signedIn: true, tenantId: caller.tenantId, admin: caller.admin });
  };
}
