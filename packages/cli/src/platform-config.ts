import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ControlPlaneOptions, type TenantLimitOptions, defaultTenantLimits } from '@space/control-plane';

/** Settings of `space up` and `space control-plane`, each from its environment variable (see docs/operations.md). */
export interface PlatformConfig {
  /** SPACE_HOST, default 127.0.0.1 */
  host: string;
  /** SPACE_PORT, default 7070 */
  port: number;
  /** SPACE_DATA_DIR, default /var/lib/space */
  dataDir: string;
  /** SPACE_DATABASE_URL: a postgres:// URL shared by control planes; when unset, SQLite in <data>/space.db */
  databaseUrl: string | undefined;
  /** SPACE_API_KEY: the admin key; when unset one is generated into <data>/api-key */
  apiKey: string | undefined;
  /** SPACE_TEMPLATES: templates built before serving, default "base,tiny" */
  templates: string[];
  /** SPACE_CHECKPOINT_KEEP: automatic checkpoints kept per session, default 5 */
  keepAutomaticCheckpoints: number;
  /** SPACE_FULL_CHECKPOINT_PAUSE_PERCENT: how much of a busy sandbox's time automatic full checkpoints may pause it, default 2 */
  fullCheckpointPausePercent: number;
  /** SPACE_MAINTENANCE_TICK_MS: how often automatic checkpoints and idle stops are considered, default 5000 */
  maintenanceTickMs: number;
  /** SPACE_SECRETS_KEY_FILE: the key that encrypts secret values in the store, default <data>/secrets.key */
  secretsKeyFile: string;
  /** SPACE_LIFECYCLE_WAIT_MS: how long a call waits for a session's restore, delete, checkpoint, ... before 409 SESSION_BUSY, default 30000 */
  lifecycleWaitMs: number;
  /** SPACE_TENANT_*: what one tenant may keep and do at once (see tenant-limits.ts for each default) */
  tenantLimits: TenantLimitOptions;
  /** SPACE_SESSION_DISK_GB: disk of a session that names none, default 10 */
  defaultDiskGb: number;
  /** SPACE_NODE_LOST_AFTER_SEC: a node without a heartbeat for this long is lost, default 10 */
  nodeLostAfterSec: number;
  /** SPACE_OBJECT_STORE: where nodes store checkpoints (file:///dir or s3://bucket/prefix); unset: they stay on their node */
  objectStore: string | undefined;
  /** SPACE_PREVIEW_DOMAIN: a wildcard domain (*.domain) pointing at the control planes, for preview URLs on hosts of their own */
  previewDomain: string | undefined;
  /** SPACE_PREVIEW_MAX_CONNECTIONS: preview connections open at once per session in one control plane, default 64 */
  previewMaxConnections: number;
  /** SPACE_TEMPLATE_MAX_CONTEXT_MB: the most a Dockerfile build's context may hold, default 64 */
  templateMaxContextMb: number;
}

function previewDomain(env: NodeJS.ProcessEnv): string | undefined {
  const raw = env.SPACE_PREVIEW_DOMAIN?.trim().toLowerCase().replace(/^\*\./, '');
  if (!raw) return undefined;
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(raw))
    throw new Error(`SPACE_PREVIEW_DOMAIN must be a domain name such as preview.example.com, got ${JSON.stringify(env.SPACE_PREVIEW_DOMAIN)}`);
  return raw;
}

function positiveNumber(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(raw)}`);
  return value;
}

function percent(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = positiveNumber(env, name, fallback);
  if (value > 100) throw new Error(`${name} is a percentage up to 100, got ${JSON.stringify(env[name])}`);
  return value;
}

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = positiveNumber(env, name, fallback);
  if (!Number.isInteger(value)) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(env[name])}`);
  return value;
}

export function platformConfig(env: NodeJS.ProcessEnv): PlatformConfig {
  const port = Number(env.SPACE_PORT ?? 7070);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`SPACE_PORT must be a port number, got ${JSON.stringify(env.SPACE_PORT)}`);
  const dataDir = path.resolve(env.SPACE_DATA_DIR ?? '/var/lib/space');
  return {
    host: env.SPACE_HOST ?? '127.0.0.1',
    port,
    dataDir,
    databaseUrl: env.SPACE_DATABASE_URL || undefined,
    apiKey: env.SPACE_API_KEY || undefined,
    templates: (env.SPACE_TEMPLATES ?? 'base,tiny')
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean),
    keepAutomaticCheckpoints: positiveInt(env, 'SPACE_CHECKPOINT_KEEP', 5),
    fullCheckpointPausePercent: percent(env, 'SPACE_FULL_CHECKPOINT_PAUSE_PERCENT', 2),
    maintenanceTickMs: positiveInt(env, 'SPACE_MAINTENANCE_TICK_MS', 5000),
    secretsKeyFile: path.resolve(env.SPACE_SECRETS_KEY_FILE ?? path.join(dataDir, 'secrets.key')),
    lifecycleWaitMs: positiveInt(env, 'SPACE_LIFECYCLE_WAIT_MS', 30_000),
    tenantLimits: {
      maxRequests: positiveInt(env, 'SPACE_TENANT_MAX_REQUESTS', defaultTenantLimits.maxRequests),
      maxStreams: positiveInt(env, 'SPACE_TENANT_MAX_STREAMS', defaultTenantLimits.maxStreams),
      requestsPerSec: positiveInt(env, 'SPACE_TENANT_REQUESTS_PER_SEC', defaultTenantLimits.requestsPerSec),
      maxSessions: positiveInt(env, 'SPACE_TENANT_MAX_SESSIONS', defaultTenantLimits.maxSessions),
      maxConcurrentCreates: positiveInt(env, 'SPACE_TENANT_MAX_CONCURRENT_CREATES', defaultTenantLimits.maxConcurrentCreates),
      maxCheckpointGb: positiveNumber(env, 'SPACE_TENANT_MAX_CHECKPOINT_GB', defaultTenantLimits.maxCheckpointGb),
    },
    defaultDiskGb: positiveNumber(env, 'SPACE_SESSION_DISK_GB', 10),
    nodeLostAfterSec: positiveNumber(env, 'SPACE_NODE_LOST_AFTER_SEC', 10),
    objectStore: env.SPACE_OBJECT_STORE || undefined,
    previewDomain: previewDomain(env),
    previewMaxConnections: positiveInt(env, 'SPACE_PREVIEW_MAX_CONNECTIONS', 64),
    templateMaxContextMb: positiveNumber(env, 'SPACE_TEMPLATE_MAX_CONTEXT_MB', 64),
  };
}

/** The control plane's tunables, the same for `space up` and `space control-plane`. */
export function controlPlaneTuning(
  config: PlatformConfig,
): Pick<
  ControlPlaneOptions,
  | 'keepAutomaticCheckpoints'
  | 'fullCheckpointPauseShare'
  | 'maintenanceTickMs'
  | 'lifecycleWaitMs'
  | 'tenantLimits'
  | 'defaultDiskGb'
  | 'nodeLostAfterSec'
  | 'sharedStore'
  | 'objectStore'
  | 'preview'
  | 'templateMaxContextMb'
> {
  return {
    templateMaxContextMb: config.templateMaxContextMb,
    preview: { domain: config.previewDomain ?? null, maxConnectionsPerSession: config.previewMaxConnections },
    objectStore: config.objectStore,
    nodeLostAfterSec: config.nodeLostAfterSec,
    sharedStore: config.databaseUrl !== undefined,
    keepAutomaticCheckpoints: config.keepAutomaticCheckpoints,
    fullCheckpointPauseShare: config.fullCheckpointPausePercent / 100,
    maintenanceTickMs: config.maintenanceTickMs,
    lifecycleWaitMs: config.lifecycleWaitMs,
    tenantLimits: config.tenantLimits,
    defaultDiskGb: config.defaultDiskGb,
  };
}

/** What runs inside every sandbox (the agent and its helpers), built by `npm run build` into packages/agent/dist. */
export function sandboxRuntimeBuildDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return path.resolve(here, '../../agent/dist');
}
