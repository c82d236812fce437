export { ControlPlane, type ControlPlaneOptions } from './control-plane.js';
export { openStore, openSqliteStore, openPostgresStore } from './store/open-store.js';
export type { Store, SessionRow, TenantRow, ApiKeyRow } from './store/store.js';
export { Authenticator, hashKey, generateKey } from './tenants/auth.js';
export { SessionService } from './sessions/session-service.js';
export { NodeClient } from './cluster/node-client.js';
export { SecretCipher } from './store/secret-cipher.js';
export { type KeyWrap, secretsKeyWrap } from './checkpoints/data-keys.js';
export { ClusterCa, createClusterCa } from './tenants/cluster-ca.js';
export { placementViewMs } from './cluster/node-directory.js';
export { ControlPlaneCertificate, type ClusterTls } from './tenants/control-plane-certificate.js';
export { plainNodeApiRefusal } from './cluster/plain-node-api.js';
export {
  controlPlaneSettings,
  readControlPlaneSettings,
  defaultControlPlaneSettings,
  secretsKeyFileOf,
  openStoreFor,
  type ControlPlaneSettings,
} from './settings.js';
export { startLocalPostgres, type LocalPostgres } from './store/local-postgres.js';
