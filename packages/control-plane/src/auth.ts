import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ErrorCode, SpaceError, newId } from '@space/protocol';
import { bearerToken } from '@space/server-kit';
import type { Store } from './store/store.js';

export interface Caller {
  tenantId: string;
  admin: boolean;
}

export const adminTenantId = 'tn_admin000';

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export function generateKey(): string {
  return `sk_${randomBytes(24).toString('base64url')}`;
}

/** API keys: high-entropy random strings stored only as sha256 hashes, each bound to a tenant. */
export class Authenticator {
  /** The caller of each request seen, so the admission hook, the upgrade guard and the route look the key up once. */
  private readonly callers = new WeakMap<IncomingMessage, Promise<Caller>>();

  constructor(private readonly store: Store) {}

  /** Installs the admin key (its tenant is created on first use). */
  async installAdminKey(key: string): Promise<void> {
    if (!(await this.store.getTenant(adminTenantId))) await this.store.insertTenant({ id: adminTenantId, name: 'admin', createdAt: new Date().toISOString() });
    await this.store.replaceAdminKey({ id: newId('key'), tenantId: adminTenantId, hash: hashKey(key), admin: true, createdAt: new Date().toISOString() });
  }

  authenticate(req: IncomingMessage): Promise<Caller> {
    const known = this.callers.get(req);
    if (known) return known;
    const caller = this.lookUp(req);
    this.callers.set(req, caller);
    return caller;
  }

  private async lookUp(req: IncomingMessage): Promise<Caller> {
    const key = bearerToken(req);
    if (!key) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'missing API key: send "Authorization: Bearer <key>"');
    const row = await this.store.findApiKey(hashKey(key));
    if (!row) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'invalid API key');
    return { tenantId: row.tenantId, admin: row.admin };
  }

  requireAdmin(caller: Caller): void {
    if (!caller.admin) throw new SpaceError(ErrorCode.FORBIDDEN, 'this operation needs the admin key');
  }

  async createKey(tenantId: string): Promise<{ id: string; tenantId: string; key: string }> {
    if (!(await this.store.getTenant(tenantId))) throw new SpaceError(ErrorCode.TENANT_NOT_FOUND, `no tenant ${JSON.stringify(tenantId)}`);
    const key = generateKey();
    const id = newId('key');
    await this.store.insertApiKey({ id, tenantId, hash: hashKey(key), admin: false, createdAt: new Date().toISOString() });
    return { id, tenantId, key };
  }
}
