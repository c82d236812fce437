import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ErrorCode, SpaceError, findSandboxRoute, newId } from '@space/protocol';
import { bearerToken } from '@space/server-kit';
import type { ApiKeyRow, Store } from '../store/store.js';
import { KeyCache } from './key-cache.js';

export interface Caller {
  tenantId: string;
  admin: boolean;
  /** Set for a session token: the one session it may act on. */
  sessionId?: string;
}

export const adminTenantId = 'tn_admin000';

/** The most keys a control plane keeps looked up (about 300 bytes each). */
const keyCacheEntries = 50_000;

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** A new key: `sk_` (API key), `st_` (session token) or `pt_` (preview token) and 192 random bits, or E2B's shape, `e2b_` and 160 bits in hex. */
export function generateKey(kind: 'sk' | 'st' | 'pt' | 'e2b' = 'sk'): string {
  return kind === 'e2b' ? `e2b_${randomBytes(20).toString('hex')}` : `${kind}_${randomBytes(24).toString('base64url')}`;
}

/** The path as the router sees it (`..` resolved), or null for one that does not parse. */
function pathOf(url: string | undefined): string | null {
  try {
    return new URL(url ?? '/', 'http://local').pathname;
  } catch {
    return null;
  }
}

/** A preview token's scope: one port of its session. */
export function portScope(port: number): string {
  return `port:${port}`;
}

/**
 * What a session token may call: reading its session, the session's sandbox operations (exec,
 * processes, files, streams) and its ports (preview URLs); not deleting, restoring or forking it,
 * minting tokens, nor anything else. A preview token (scope `port:N`): that port's URLs only.
 */
function sessionKeyMayCall(sessionId: string, scope: string | null, method: string | undefined, url: string | undefined): boolean {
  const base = `/v1/sessions/${sessionId}`;
  const path = pathOf(url);
  if (path === null) return false;
  const port = /^port:(\d+)$/.exec(scope ?? '')?.[1];
  const underPort = (p: string) => path === `${base}/ports/${p}` || path.startsWith(`${base}/ports/${p}/`);
  if (port !== undefined) return underPort(port);
  if (path === base) return method === 'GET';
  if (!path.startsWith(`${base}/`)) return false;
  if (/^\/ports\/\d+(\/|$)/.test(path.slice(base.length))) return true;
  // WebSocket upgrades arrive as GET, like the table's stream routes.
  const found = findSandboxRoute(method ?? '', path.slice(base.length));
  return Boolean(found && !('methodMismatch' in found));
}

/** The subprotocol a browser's WebSocket carries the key in, as `space-key.<key>`. */
const keySubprotocol = 'space-key.';

/** The subprotocols SPACE's own WebSocket clients offer: `space`, and the key as `space-key.<key>`. */
export function isSpaceSubprotocol(protocol: string): boolean {
  return protocol === 'space' || protocol.startsWith(keySubprotocol);
}

/**
 * The key a browser's WebSocket carries as a subprotocol (`space-key.<key>`, next to `space`, which
 * the server picks and echoes): browsers cannot set headers on a WebSocket. Upgrades only.
 */
export function webSocketKey(req: IncomingMessage): string | null {
  if (String(req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return null;
  const offered = String(req.headers['sec-websocket-protocol'] ?? '').split(',');
  const entry = offered.map((p) => p.trim()).find((p) => p.startsWith(keySubprotocol));
  return entry ? entry.slice(keySubprotocol.length) || null : null;
}

/** The cookie the web console keeps its key in: HttpOnly (no script reads it), SameSite=Strict. */
export const consoleCookieName = 'space_console';
/** The header the console sends with every call: another origin cannot send it without a CORS preflight, which SPACE never grants. */
const consoleHeaderName = 'x-space-console';

/** The request's cookies by name (a value may hold `=`). */
export function requestCookies(req: IncomingMessage): Map<string, string> {
  const jar = new Map<string, string>();
  for (const pair of String(req.headers.cookie ?? '').split(';')) {
    const at = pair.indexOf('=');
    const name = at === -1 ? '' : pair.slice(0, at).trim();
    if (name) jar.set(name, pair.slice(at + 1).trim());
  }
  return jar;
}

/**
 * The console's key, from its cookie, for requests made by the console's own pages only. A browser
 * sends the cookie with any request to this host, so (against cross-site request forgery, also
 * from preview pages of the same site) a call must carry the console's header, which another
 * origin cannot add, and a WebSocket (which cannot carry headers) must come from this origin.
 */
function consoleKey(req: IncomingMessage): string | null {
  const key = requestCookies(req).get(consoleCookieName);
  if (!key) return null;
  const upgrade = req.headers.upgrade !== undefined;
  if ((!upgrade && req.headers[consoleHeaderName] !== '1') || !sameOrigin(req, upgrade))
    throw new SpaceError(
      ErrorCode.UNAUTHORIZED,
      'the console\'s sign-in is accepted only from the console\'s own pages; other clients send "Authorization: Bearer <key>"',
    );
  return key;
}

/** Whether the request's Origin is this host (required of WebSockets; checked for calls when a browser sends one). */
function sameOrigin(req: IncomingMessage, required: boolean): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return !required;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

/** API keys: high-entropy random strings stored only as sha256 hashes, each bound to a tenant. */
export class Authenticator {
  /** The caller of each request seen, so the admission hook, the upgrade guard and the route look the key up once. */
  private readonly callers = new WeakMap<IncomingMessage, Promise<Caller>>();

  private readonly keys: KeyCache;
  private readonly now: () => number;

  /** `cacheMs`: how long a key looked up is taken without reading it again (`SPACE_AUTH_CACHE_SEC`; 0: every request reads it). */
  constructor(
    private readonly store: Store,
    { cacheMs = 0, now = Date.now }: { cacheMs?: number; now?: () => number } = {},
  ) {
    this.now = now;
    this.keys = new KeyCache({ ttlMs: cacheMs, maxEntries: keyCacheEntries, now });
  }

  /** Installs the admin key (its tenant is created on first use). */
  async installAdminKey(key: string): Promise<void> {
    if (!(await this.store.getTenant(adminTenantId))) await this.store.insertTenant({ id: adminTenantId, name: 'admin', createdAt: new Date().toISOString() });
    await this.store.replaceAdminKey({
      id: newId('key'),
      tenantId: adminTenantId,
      hash: hashKey(key),
      admin: true,
      createdAt: new Date().toISOString(),
      sessionId: null,
      scope: null,
      expiresAt: null,
    });
  }

  authenticate(req: IncomingMessage): Promise<Caller> {
    const known = this.callers.get(req);
    if (known) return known;
    const caller = this.lookUp(req);
    this.callers.set(req, caller);
    return caller;
  }

  private async lookUp(req: IncomingMessage): Promise<Caller> {
    const key = bearerToken(req) ?? webSocketKey(req) ?? consoleKey(req);
    if (!key) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'missing API key: send "Authorization: Bearer <key>"');
    return this.authenticateKey(key, req);
  }

  /** The caller a key (from wherever the request carried it) stands for, for this request. */
  async authenticateKey(key: string, req: IncomingMessage): Promise<Caller> {
    const row = await this.findKey(key);
    if (!row) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'invalid API key');
    if (row.expiresAt && Date.parse(row.expiresAt) <= this.now()) throw new SpaceError(ErrorCode.UNAUTHORIZED, `the token expired at ${row.expiresAt}`);
    if (!row.sessionId) return { tenantId: row.tenantId, admin: row.admin };
    if (!sessionKeyMayCall(row.sessionId, row.scope, req.method, req.url))
      throw new SpaceError(
        ErrorCode.FORBIDDEN,
        row.scope
          ? `a preview token reaches only its port (${row.scope}) of session ${row.sessionId}`
          : `a session token acts only on the sandbox of session ${row.sessionId}`,
      );
    return { tenantId: row.tenantId, admin: false, sessionId: row.sessionId };
  }

  /** Whether `key` is one of SPACE's keys or tokens (of any tenant, scope or expiry): such a value is never passed to a tenant's app. */
  async isKnownKey(key: string): Promise<boolean> {
    return (await this.findKey(key)) !== null;
  }

  /** Revokes the preview tokens of one port of a session; how many there were. */
  async revokePreviewTokens(sessionId: string, port: number): Promise<number> {
    const revoked = await this.store.deleteScopedKeys(sessionId, portScope(port));
    this.keys.forgetSession(sessionId, portScope(port));
    return revoked;
  }

  /** Forgets the tokens of a deleted session this process looked up (the store deleted them with it). */
  forgetSessionKeys(sessionId: string): void {
    this.keys.forgetSession(sessionId);
  }

  /** The stored key, from the cache when it was read lately. */
  private async findKey(key: string): Promise<ApiKeyRow | null> {
    const hash = hashKey(key);
    const cached = this.keys.get(hash);
    if (cached) return cached;
    const row = await this.store.findApiKey(hash);
    if (row) this.keys.set(hash, row);
    return row;
  }

  requireAdmin(caller: Caller): void {
    if (!caller.admin) throw new SpaceError(ErrorCode.FORBIDDEN, 'this operation needs the admin key');
  }

  async createKey(tenantId: string, format: 'space' | 'e2b' = 'space'): Promise<{ id: string; tenantId: string; key: string }> {
    if (!(await this.store.getTenant(tenantId))) throw new SpaceError(ErrorCode.TENANT_NOT_FOUND, `no tenant ${JSON.stringify(tenantId)}`);
    const { id, key } = await this.mint(format === 'e2b' ? 'e2b' : 'sk', tenantId, {});
    return { id, tenantId, key };
  }

  /** A token for one session of the caller's tenant (the caller has checked that the session is theirs). */
  async createSessionToken(tenantId: string, sessionId: string): Promise<{ sessionId: string; token: string }> {
    return { sessionId, token: (await this.mint('st', tenantId, { sessionId })).key };
  }

  /** A preview token: one port of one session of the caller's tenant, for `ttlSec`. */
  async createPreviewToken(tenantId: string, sessionId: string, port: number, ttlSec: number): Promise<{ token: string; expiresAt: string }> {
    const expiresAt = new Date(this.now() + ttlSec * 1000).toISOString();
    return { token: (await this.mint('pt', tenantId, { sessionId, scope: portScope(port), expiresAt })).key, expiresAt };
  }

  /** A new key of the tenant, stored as its hash with what it is bound to. */
  private async mint(
    kind: 'sk' | 'st' | 'pt' | 'e2b',
    tenantId: string,
    bound: { sessionId?: string; scope?: string; expiresAt?: string },
  ): Promise<{ id: string; key: string }> {
    const key = generateKey(kind);
    const id = newId('key');
    await this.store.insertApiKey({
      id,
      tenantId,
      hash: hashKey(key),
      admin: false,
      createdAt: new Date().toISOString(),
      sessionId: bound.sessionId ?? null,
      scope: bound.scope ?? null,
      expiresAt: bound.expiresAt ?? null,
    });
    return { id, key };
  }
}
