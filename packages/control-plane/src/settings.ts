import path from 'node:path';
import { SettingsError, type SettingValues, otlpTracesUrl, readSettings, setting, sharedSettings } from '@space/server-kit';
import { openStore } from './store/open-store.js';
import type { Store } from './store/store.js';
import { defaultTenantLimits, limitSettings } from './tenants/tenant-limits.js';

const domainName = /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i;

/** Every setting of the control plane (`space control-plane`, and the control-plane half of `space up`); docs/configuration.md is generated from it. */
export const controlPlaneSettings = {
  host: setting.text('SPACE_HOST', { default: '127.0.0.1', expects: 'an address', doc: 'the address the public API listens on' }),
  port: setting.integer('SPACE_PORT', { default: 7070, min: 0, max: 65535, doc: 'the port of the public API; 0 takes a free one' }),
  databaseUrl: setting.text('SPACE_DATABASE_URL', {
    default: undefined,
    check: /^postgres(ql)?:\/\/\S+$/,
    expects: 'a postgres:// URL',
    shownDefault: 'SQLite in `<data>/space.db`',
    doc: 'the store: PostgreSQL, shared by the control planes of a cluster',
  }),
  databaseConnections: setting.integer('SPACE_DATABASE_CONNECTIONS', {
    default: 10,
    min: 1,
    max: 1000,
    doc: "connections this control plane keeps to PostgreSQL at most for the API's calls; statements beyond wait for one (`space_store_statements_waiting{pool=\"calls\"}` in `/metrics`). The control planes' sum, with their background connections, must stay under the server's `max_connections`",
  }),
  databaseBackgroundConnections: setting.integer('SPACE_DATABASE_BACKGROUND_CONNECTIONS', {
    default: 4,
    min: 1,
    max: 1000,
    doc: 'connections this control plane keeps to PostgreSQL at most for its background work (the maintenance pass, its roster beat), apart from the calls\' so that neither waits behind the other for a connection (`space_store_statements_waiting{pool="background"}`)',
  }),
  nodeUrl: setting.text('SPACE_NODE_URL', {
    default: undefined,
    check: /^https?:\/\/[^/]+/,
    expects: 'an http(s) URL',
    doc: 'a node this control plane registers on its behalf (`space node` without `SPACE_CONTROL_PLANE_URL`); needs `SPACE_NODE_TOKEN`',
  }),
  secretsKeyFile: setting.text('SPACE_SECRETS_KEY_FILE', {
    default: undefined,
    expects: 'a file',
    shownDefault: '`<data>/secrets.key`',
    doc: 'the key that encrypts secret values in the store; the same file on every control plane of a cluster',
  }),
  clusterCaDir: setting.text('SPACE_CLUSTER_CA_DIR', {
    default: undefined,
    expects: 'a directory (`space cluster ca init`)',
    shownDefault: 'none: node APIs over plain HTTP',
    doc: 'the cluster CA (`ca.crt`, `ca.key`), the same on every control plane: nodes that join get a certificate of it for their node API, served over HTTPS, and calls to nodes check it',
  }),
  allowPlainNodeApi: setting.flag('SPACE_ALLOW_PLAIN_NODE_API', {
    default: false,
    doc: '`1`: take nodes whose node API is plain HTTP on an address other than loopback (node tokens and secret values then cross the network in the clear); refused otherwise',
  }),
  drainParallel: setting.integer('SPACE_DRAIN_PARALLEL', {
    default: 4,
    min: 1,
    max: 64,
    doc: 'sessions a drain moves off a node at once (each with its checkpoint, shipment and start elsewhere)',
  }),
  nodeLostAfterSec: setting.positive('SPACE_NODE_LOST_AFTER_SEC', {
    default: 10,
    doc: 'a node without a heartbeat for this long is lost and its sessions move, seconds',
  }),
  checkpointKeep: setting.integer('SPACE_CHECKPOINT_KEEP', { default: 5, min: 1, doc: 'automatic checkpoints kept per session' }),
  fullCheckpointPausePercent: setting.positive('SPACE_FULL_CHECKPOINT_PAUSE_PERCENT', {
    default: 2,
    max: 100,
    doc: 'how much of a busy sandbox\'s time automatic full checkpoints may pause it (see reliability.md, "The rollback window")',
  }),
  maintenanceTickMs: setting.integer('SPACE_MAINTENANCE_TICK_MS', {
    default: 5000,
    min: 1,
    doc: 'how often automatic checkpoints, idle stops and repairs are considered',
  }),
  callDeadlineSec: setting.positive('SPACE_CALL_DEADLINE_SEC', {
    default: 300,
    doc: 'how long a sandbox call whose client names no deadline (`x-space-timeout-ms`; the SDKs send their timeout) may wait for its session (a resume, a move) before it is dropped unrun, `DEADLINE_EXCEEDED`; a call whose client left is dropped at once',
  }),
  authCacheSec: setting.integer('SPACE_AUTH_CACHE_SEC', {
    default: 5,
    min: 0,
    max: 300,
    doc: "how long a control plane keeps an API key or token it looked up, so a call reads no key from the store: a key revoked through another control plane (a preview token, a deleted session's tokens) is refused within this bound, through this one at once; 0 reads every key",
  }),
  idempotencyKeepSec: setting.positive('SPACE_IDEMPOTENCY_KEEP_SEC', {
    default: 86_400,
    doc: 'how long the outcome of a call made with an `Idempotency-Key` is kept: a retry with the key within it gets that outcome instead of running again, seconds',
  }),
  lifecycleWaitMs: setting.integer('SPACE_LIFECYCLE_WAIT_MS', {
    default: 30_000,
    min: 1,
    doc: "how long a call waits for a session's restore, delete, checkpoint… before `409 SESSION_BUSY`",
  }),
  templateMaxContextMb: setting.positive('SPACE_TEMPLATE_MAX_CONTEXT_MB', { default: 64, doc: 'the build context a Dockerfile build may carry (413 past it)' }),
  previewDomain: setting.text('SPACE_PREVIEW_DOMAIN', {
    default: undefined,
    check: domainName,
    expects: 'a domain name such as preview.example.com',
    doc: 'a wildcard domain (`*.domain`) pointing at the control planes, for preview URLs on hosts of their own (`<port>-<session>.<domain>`); unset: path form only',
  }),
  previewMaxConnections: setting.integer('SPACE_PREVIEW_MAX_CONNECTIONS', {
    default: 64,
    min: 1,
    doc: 'preview requests and WebSockets open at once per session, per control-plane process (429 past it)',
  }),
  tenantMaxSessions: setting.integer(limitSettings.sessions, {
    default: defaultTenantLimits.maxSessions,
    min: 1,
    doc: 'sessions one tenant may have, whatever their status (403 `QUOTA_EXCEEDED` past it)',
  }),
  tenantMaxCheckpointGb: setting.positive(limitSettings.checkpointStorageBytes, {
    default: defaultTenantLimits.maxCheckpointGb,
    doc: "memory images one tenant's full checkpoints may hold together; past it full checkpoints become fs ones",
  }),
  tenantMaxConcurrentCreates: setting.integer(limitSettings.concurrentCreates, {
    default: defaultTenantLimits.maxConcurrentCreates,
    min: 1,
    doc: 'session creations and forks of one tenant under way at once, shared by the control planes (each holds its part; 429 past it)',
  }),
  tenantMaxQueuedCreates: setting.integer('SPACE_TENANT_MAX_QUEUED_CREATES', {
    default: defaultTenantLimits.maxQueuedCreates,
    min: 0,
    doc: 'session creations and forks of one tenant that wait (first come, first served) for room under the creations at once; 429 past them (0: none waits)',
  }),
  tenantCreateQueueWaitSec: setting.positive('SPACE_TENANT_CREATE_QUEUE_WAIT_SEC', {
    default: defaultTenantLimits.createQueueWaitMs / 1000,
    doc: 'how long a creation waits for room before it is refused (429)',
  }),
  tenantRequestsPerSec: setting.integer(limitSettings.requestsPerSec, {
    default: defaultTenantLimits.requestsPerSec,
    min: 1,
    doc: 'calls and stream openings per second of one tenant, bursts of twice as many, shared by the control planes (429 with `Retry-After`)',
  }),
  tenantMaxRequests: setting.integer(limitSettings.openRequests, {
    default: defaultTenantLimits.maxRequests,
    min: 1,
    doc: 'calls one tenant has under way at once, shared by the control planes (429 past it)',
  }),
  tenantMaxStreams: setting.integer(limitSettings.openStreams, {
    default: defaultTenantLimits.maxStreams,
    min: 1,
    doc: 'WebSocket streams (exec, PTY, attach, watch) one tenant has open at once, shared by the control planes',
  }),
};

/** The control plane's settings and the shared ones, read once at start (a bad value stops it, named). */
export type ControlPlaneSettings = SettingValues<typeof sharedSettings & typeof controlPlaneSettings>;

export function readControlPlaneSettings(env: NodeJS.ProcessEnv): ControlPlaneSettings {
  const settings = readSettings({ ...sharedSettings, ...controlPlaneSettings }, env);
  checkFenceOrdering(settings.nodeFenceAfterSec * 1000, settings.nodeLostAfterSec * 1000);
  return settings;
}

/**
 * A node must freeze its sandboxes before any control plane may find it lost and move its sessions,
 * or a cut-off copy and the moved one would both act: the fence delay below the lost delay.
 */
export function checkFenceOrdering(fenceAfterMs: number, lostAfterMs: number): void {
  if (fenceAfterMs >= lostAfterMs)
    throw new SettingsError([
      `SPACE_NODE_FENCE_AFTER_SEC (${fenceAfterMs / 1000}) must be below SPACE_NODE_LOST_AFTER_SEC (${lostAfterMs / 1000}): a node cut off from every control plane must pause its sandboxes before its sessions may move`,
    ]);
}

/** The defaults, for tests and tools that build a control plane's services without an environment. */
export function defaultControlPlaneSettings(changes: Partial<ControlPlaneSettings> = {}): ControlPlaneSettings {
  return { ...readControlPlaneSettings({}), ...changes };
}

/** The key file of secret values: `SPACE_SECRETS_KEY_FILE`, else `<data>/secrets.key`. */
export function secretsKeyFileOf(settings: ControlPlaneSettings): string {
  return path.resolve(settings.secretsKeyFile ?? path.join(settings.dataDir, 'secrets.key'));
}

/** The store a control plane's settings name (`space up`, `space control-plane`): both pools sized, traced when traces are exported. */
export function openStoreFor(settings: ControlPlaneSettings, dataDir: string): Promise<Store> {
  return openStore({
    databaseUrl: settings.databaseUrl,
    dataDir,
    traced: otlpTracesUrl(settings) !== null,
    maxConnections: settings.databaseConnections,
    backgroundConnections: settings.databaseBackgroundConnections,
  });
}
