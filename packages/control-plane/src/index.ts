export { ControlPlane, type ControlPlaneOptions } from './control-plane.js';
export { openStore, openSqliteStore, openPostgresStore } from './store/open-store.js';
export type { Store, SessionRow, TenantRow, ApiKeyRow } from './store/store.js';
export { Authenticator, hashKey, generateKey } from './tenants/auth.js';
export { SessionService } from './sessions/session-service.js';
export { NodeClient } from './cluster/node-client.js';
export { SecretCipher } from './store/secret-cipher.js';
export { controlPlaneSettings, readControlPlaneSettings, defaultControlPlaneSettings, secretsKeyFileOf, type ControlPlaneSettings } from './settings.js';
export { startLocalPostgres, type LocalPostgres } from './store/local-postgres.js';
