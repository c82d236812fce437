export { ControlPlane, type ControlPlaneOptions } from './control-plane.js';
export { openStore, openSqliteStore, openPostgresStore } from './store/open-store.js';
export type { Store, SessionRow, TenantRow, ApiKeyRow } from './store/store.js';
export { Authenticator, hashKey, generateKey } from './auth.js';
export { SessionService } from './session-service.js';
export { NodeClient } from './node-client.js';
export { SecretCipher } from './secret-cipher.js';
export { TenantLimits, defaultTenantLimits, type TenantLimitOptions } from './tenant-limits.js';
export { startLocalPostgres, type LocalPostgres } from './local-postgres.js';
