import { randomBytes } from 'node:crypto';
import { TemplateCatalog } from './templates/template-catalog.js';
import { NodeCredentials } from './tenants/node-credentials.js';
import type { ClusterTls } from './tenants/control-plane-certificate.js';
import { TemplateService } from './builds/template-service.js';
import { TemplateBuilds } from './builds/template-builds.js';
import { Authenticator } from './tenants/auth.js';
import { NodeDirectory, type NodeDirectoryOptions } from './cluster/node-directory.js';
import { NodeDrain } from './sessions/node-drain.js';
import { SessionService } from './sessions/session-service.js';
import { CheckpointTaker } from './checkpoints/checkpoint-taker.js';
import { CheckpointShipper } from './checkpoints/checkpoint-shipper.js';
import { SessionMover } from './sessions/session-mover.js';
import { LeftVolumes } from './sessions/left-volumes.js';
import { MovingVolumes } from './sessions/moving-volumes.js';
import { ControlPlaneRoster, defaultRosterOptions } from './cluster/control-plane-roster.js';
import { SessionCheckpointService } from './sessions/session-checkpoint-service.js';
import { SessionPauser } from './sessions/session-pauser.js';
import { VolumeService } from './sessions/volume-service.js';
import { TenantEvents } from './tenants/tenant-events.js';
import { MetricsHistory, MetricsReport } from './api/metrics-report.js';
import { Activity, recordActivityIn } from './sessions/activity.js';
import { CellCheckpoints } from './sessions/cell-checkpoints.js';
import { Maintenance } from './maintenance/maintenance.js';
import { NodeHeartbeats } from './maintenance/node-heartbeats.js';
import { LifecycleQueue } from './sessions/lifecycle-queue.js';
import { SessionCalls } from './sessions/session-calls.js';
import { TenantLimits, type TenantLimitOptions } from './tenants/tenant-limits.js';
import { Metrics } from './metrics/metrics.js';
import type { Store } from './store/store.js';
import { EgressService } from './tenants/egress-service.js';
import { IdempotentCalls } from './api/idempotent-calls.js';
import { DataKeys, type KeyWrap, secretsKeyWrap } from './checkpoints/data-keys.js';
import type { SecretCipher } from './store/secret-cipher.js';
import type { ControlPlaneSettings } from './settings.js';
import type { PublicApiDeps } from './api/public-api.js';
import { SessionServices } from './sessions/session-services.js';
import { CheckpointFileReader } from './sessions/checkpoint-file-reader.js';
import { PathRestorer } from './sessions/path-restorer.js';
import { lineLog } from '@space/server-kit';
import { UsageCollector } from './usage/usage-collector.js';
import { UsageReports } from './usage/usage-reports.js';

export interface ServiceGraphDeps {
  store: Store;
  secrets: SecretCipher;
  settings: ControlPlaneSettings;
  log: (message: string) => void;
  /** The public API's own address: template builds run their steps through it. */
  apiUrl: () => string;
  /** Who holds this control plane's lifecycle leases (see LifecycleQueue). */
  seat: string;
  /** The clock of activity, limits, pauses and maintenance; tests set one they move. */
  now?: () => number;
  /** How the directory reaches a node; tests hand it a fake one. */
  connect?: NodeDirectoryOptions['connect'];
  /** The cluster CA (`SPACE_CLUSTER_CA_DIR`), which signs node APIs' certificates (calls to nodes check them), and this control plane's client certificate. */
  clusterTls?: ClusterTls | null;
  /** What wraps the tenants' data keys: the secrets key unless a KMS is given. */
  keyWrap?: KeyWrap;
  /** How often a call waiting for a session's lease looks again; tests poll faster. */
  lifecyclePollMs?: number;
  /** How long a heartbeat's row and a collected usage batch wait to be written with others (tests: 0). */
  writeWindowMs?: number;
}

/** A call under way holds its idempotency key this long past its control plane's last renewal: a retry after that control plane died waits at most this. */
const idempotencyClaimMs = 30_000;

/** Per-tenant limits from their settings. */
function tenantLimitsOf(settings: ControlPlaneSettings): TenantLimitOptions {
  return {
    maxRequests: settings.tenantMaxRequests,
    maxStreams: settings.tenantMaxStreams,
    requestsPerSec: settings.tenantRequestsPerSec,
    maxSessions: settings.tenantMaxSessions,
    maxConcurrentCreates: settings.tenantMaxConcurrentCreates,
    maxQueuedCreates: settings.tenantMaxQueuedCreates,
    createQueueWaitMs: settings.tenantCreateQueueWaitSec * 1000,
    maxCheckpointGb: settings.tenantMaxCheckpointGb,
  };
}

/**
 * The control plane's services, wired once: by ControlPlane for the process and by the tests'
 * `servicesOnFakeNode`, so both run the same graph. Nothing here starts a timer or listens.
 */
export function wireServices(deps: ServiceGraphDeps) {
  const { store, settings, log } = deps;
  const now = deps.now ?? Date.now;
  const metrics = new Metrics();
  const auth = new Authenticator(store, { cacheMs: settings.authCacheSec * 1000, now });
  // This process among the control planes sharing the store: its seat and a random instance, never reused.
  const instance = `${deps.seat}/${randomBytes(6).toString('hex')}`;
  const roster = new ControlPlaneRoster(store, instance, { ...defaultRosterOptions, now, log });
  const limits = new TenantLimits(auth, store, metrics, tenantLimitsOf(settings), now, () => roster.size);
  // Recorded in the store so that no control plane stops a session another one is serving.
  const activity = new Activity(now, recordActivityIn(store));
  const lifecycle = new LifecycleQueue(store, log, {
    seat: deps.seat,
    waitMs: settings.lifecycleWaitMs,
    ...(deps.lifecyclePollMs ? { pollMs: deps.lifecyclePollMs } : {}),
  });
  const nodes = new NodeDirectory({
    store,
    cipher: deps.secrets,
    lostAfterMs: settings.nodeLostAfterSec * 1000,
    allowPlainNodeApi: settings.allowPlainNodeApi,
    ...(deps.writeWindowMs !== undefined ? { heartbeatWriteWindowMs: deps.writeWindowMs } : {}),
    ...(deps.connect ? { connect: deps.connect } : {}),
    ...(deps.clusterTls ? { nodeTls: { ca: deps.clusterTls.ca.certificate, identity: deps.clusterTls.certificate.identity } } : {}),
  });
  const nodeCredentials = new NodeCredentials({ store, auth, ca: deps.clusterTls?.ca ?? null, now, log });
  const dataKeys = new DataKeys({ store, wrap: deps.keyWrap ?? secretsKeyWrap(deps.secrets), now });
  const shipper = new CheckpointShipper({
    store,
    nodes,
    dataKeys,
    metrics,
    log,
    enabled: Boolean(settings.objectStore),
    holder: instance,
  });
  const taker = new CheckpointTaker(store, nodes, metrics, shipper);
  const egress = new EgressService(store, nodes, deps.secrets, log);
  const movingVolumes = new MovingVolumes(store);
  const leftVolumes = new LeftVolumes({ store, taker, lifecycle, audit: egress, volumes: movingVolumes, log });
  const mover = new SessionMover({ store, nodes, shipper, taker, leftVolumes, volumes: movingVolumes, audit: egress, metrics, log });
  const catalog = new TemplateCatalog(store);
  const volumes = new VolumeService(store, nodes);
  const events = new TenantEvents(store);
  const metricsReport = new MetricsReport({ store, nodes, metrics, limits, roster });
  const metricsHistory = new MetricsHistory(metricsReport);
  const usageReports = new UsageReports(store, now);
  const sessions = new SessionService({
    store,
    nodes,
    metrics,
    taker,
    activity,
    keys: auth,
    egress,
    lifecycle,
    limits,
    templates: catalog,
    shipper,
    mover,
    volumes,
    defaultDiskGb: settings.sessionDiskGb,
  });
  const drain = new NodeDrain({ store, nodes, lifecycle, mover, sessions, log, parallel: settings.drainParallel });
  const calls = new SessionCalls(store, sessions, lifecycle, activity, settings.callDeadlineSec * 1000);
  const idempotency = new IdempotentCalls({
    store,
    tenantOf: async (req) => (await auth.authenticate(req)).tenantId,
    keepMs: settings.idempotencyKeepSec * 1000,
    claimMs: idempotencyClaimMs,
    now,
    log,
  });
  const checkpoints = new SessionCheckpointService(store, nodes, sessions, taker, metrics, limits, shipper, volumes, egress);
  const keepAutomatic = settings.checkpointKeep;
  const pauser = new SessionPauser({ store, nodes, sessions, checkpoints, metrics, keepAutomatic, now });
  const cells = new CellCheckpoints({ sessions, checkpoints, activity, keepAutomatic, log, now });
  const templates = new TemplateService(store, nodes, checkpoints, catalog);
  const maxContextBytes = settings.templateMaxContextMb * 1024 * 1024;
  const builds = new TemplateBuilds(
    { store, sessions, checkpoints, templates, catalog, auth, apiUrl: deps.apiUrl, log },
    { maxContextBytes, cacheEntries: 64 },
  );
  const usage = new UsageCollector({ store, log, now, ...(deps.writeWindowMs !== undefined ? { writeWindowMs: deps.writeWindowMs } : {}) });
  const heartbeats = new NodeHeartbeats({ nodes, store, egress, usage, log });
  const maintenance = new Maintenance({
    store,
    roster,
    leftVolumes,
    nodes,
    shipper,
    sessions,
    checkpoints,
    pauser,
    activity,
    lifecycle,
    builds,
    usage,
    metrics,
    log,
    keepAutomatic,
    fullCheckpointPauseShare: settings.fullCheckpointPausePercent / 100,
    now,
  });
  return {
    store,
    metrics,
    auth,
    limits,
    activity,
    lifecycle,
    nodes,
    nodeCredentials,
    shipper,
    taker,
    leftVolumes,
    mover,
    egress,
    catalog,
    volumes,
    events,
    metricsReport,
    metricsHistory,
    usageReports,
    sessions,
    drain,
    calls,
    idempotency,
    checkpoints,
    cells,
    pauser,
    templates,
    builds,
    maxContextBytes,
    roster,
    maintenance,
    heartbeats,
  };
}

export type ServiceGraph = ReturnType<typeof wireServices>;

/** The public API's dependencies from the graph: the same in the process and in the tests. */
export function publicApiDeps(s: ServiceGraph, settings: ControlPlaneSettings, log: (message: string) => void): PublicApiDeps {
  const checkpointFiles = new CheckpointFileReader({ store: s.store, nodes: s.nodes, sessions: s.sessions, checkpoints: s.checkpoints, shipper: s.shipper });
  return {
    auth: s.auth,
    sessions: s.sessions,
    calls: s.calls,
    idempotency: s.idempotency,
    cells: s.cells,
    checkpoints: s.checkpoints,
    checkpointFiles,
    pathRestorer: new PathRestorer({ sessions: s.sessions, checkpoints: s.checkpoints, calls: s.calls, reader: checkpointFiles }),
    pauser: s.pauser,
    services: new SessionServices(s.sessions, s.store, s.nodes),
    store: s.store,
    nodes: s.nodes,
    heartbeats: s.heartbeats,
    nodeCredentials: s.nodeCredentials,
    usage: s.usageReports,
    drain: s.drain,
    egress: s.egress,
    log: lineLog(log),
    limits: s.limits,
    templates: { catalog: s.catalog, service: s.templates, builds: s.builds, maxContextBytes: s.maxContextBytes },
    volumes: s.volumes,
    // `*.preview.example.com` or `preview.example.com`: hosts are matched without the wildcard.
    preview: { domain: settings.previewDomain?.toLowerCase().replace(/^\*\./, '') ?? null, maxConnectionsPerSession: settings.previewMaxConnections },
    events: s.events,
    metricsReport: s.metricsReport,
    metricsHistory: s.metricsHistory,
  };
}
