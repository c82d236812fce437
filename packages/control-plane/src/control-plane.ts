import { hostname } from 'node:os';
import type { Server } from 'node:http';
import { closeServer, lineLog, listen } from '@space/server-kit';
import { type E2bApi, createE2bApi, e2bPrefix } from '@space/e2b';
import { createMcpHttpApi, mcpPath } from '@space/mcp';
import { consolePath, createConsoleHandler } from '@space/console';
import { consoleWithSignIn } from './api/console-session.js';
import { type PublicApiDeps, createPublicApi } from './api/public-api.js';
import type { PreviewOptions } from './api/port-routes.js';
import { TemplateCatalog } from './templates/template-catalog.js';
import { TemplateService } from './builds/template-service.js';
import { TemplateBuilds } from './builds/template-builds.js';
import { Authenticator } from './tenants/auth.js';
import { NodeClient } from './cluster/node-client.js';
import { NodeDirectory } from './cluster/node-directory.js';
import { NodeDrain } from './sessions/node-drain.js';
import { SessionService } from './sessions/session-service.js';
import { CheckpointTaker } from './checkpoints/checkpoint-taker.js';
import { CheckpointShipper } from './checkpoints/checkpoint-shipper.js';
import { SessionMover } from './sessions/session-mover.js';
import { SessionCheckpointService } from './sessions/session-checkpoint-service.js';
import { SessionPauser } from './sessions/session-pauser.js';
import { SessionServices } from './sessions/session-services.js';
import { VolumeService } from './sessions/volume-service.js';
import { TenantEvents } from './tenants/tenant-events.js';
import { MetricsHistory, MetricsReport } from './api/metrics-report.js';
import { Activity, recordActivityIn } from './sessions/activity.js';
import { Maintenance } from './maintenance/maintenance.js';
import { LifecycleQueue } from './sessions/lifecycle-queue.js';
import { SessionCalls } from './sessions/session-calls.js';
import { TenantLimits, defaultTenantLimits, type TenantLimitOptions } from './tenants/tenant-limits.js';
import { Metrics } from './metrics/metrics.js';
import type { Store } from './store/store.js';
import { EgressService } from './tenants/egress-service.js';
import type { SecretCipher } from './store/secret-cipher.js';

export interface ControlPlaneOptions {
  host: string;
  port: number;
  adminKey: string;
  store: Store;
  /**
   * The node this control plane runs with (`space up`, or `SPACE_NODE_URL`): registered by the
   * control plane on its behalf. Without one, only nodes that register themselves serve sessions.
   */
  node?: { url: string; token: string };
  /** A node without a heartbeat for this long is lost (`SPACE_NODE_LOST_AFTER_SEC`, default 10). */
  nodeLostAfterSec?: number;
  /** The nodes' object store (`SPACE_OBJECT_STORE`, for messages): checkpoints are shipped there and sessions of a lost node move. */
  objectStore?: string;
  /** Other control planes share the store (PostgreSQL): checkpoints unknown to it may be on their way in, even at start. */
  sharedStore?: boolean;
  /** Encrypts secret values in the store. */
  secrets: SecretCipher;
  /** Automatic checkpoints kept per session (`SPACE_CHECKPOINT_KEEP`, default 5). */
  keepAutomaticCheckpoints?: number;
  /** The share of a busy sandbox's time automatic full checkpoints may pause it (`SPACE_FULL_CHECKPOINT_PAUSE_PERCENT` / 100, default 0.02). */
  fullCheckpointPauseShare?: number;
  /** How often the maintenance pass runs, ms (`SPACE_MAINTENANCE_TICK_MS`, default 5000). */
  maintenanceTickMs?: number;
  /** How long a call waits for a session's lifecycle operations before SESSION_BUSY, ms (`SPACE_LIFECYCLE_WAIT_MS`, default 30000). */
  lifecycleWaitMs?: number;
  /** Per-tenant limits: sessions, creations, request rate, calls and streams open, checkpoint storage (defaults in tenant-limits.ts). */
  tenantLimits?: Partial<TenantLimitOptions>;
  /** Disk of a session that names none, GB (`SPACE_SESSION_DISK_GB`, default 10). */
  defaultDiskGb?: number;
  /** The most a Dockerfile build's context may hold, MB (`SPACE_TEMPLATE_MAX_CONTEXT_MB`, default 64). */
  templateMaxContextMb?: number;
  /** Preview URLs: the wildcard domain of the host form (`SPACE_PREVIEW_DOMAIN`), connections per session (`SPACE_PREVIEW_MAX_CONNECTIONS`, default 64). */
  preview?: Partial<PreviewOptions>;
  log?: (message: string) => void;
}

/** How often the control plane registers its configured node's heartbeat. */
const heartbeatEveryMs = 2000;
/** Checkpoints unknown to a shared store are left alone this long at start (see removeOrphans). */
const orphanGraceMs = 60_000;

/** How this process reaches its own listening address. */
function loopbackHost(host: string): string {
  if (host === '0.0.0.0' || host === '' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/** The control plane's composition root. It keeps nothing in memory that matters: the store does. */
export class ControlPlane {
  private readonly sessions: SessionService;
  private readonly calls: SessionCalls;
  private readonly volumes: VolumeService;
  private readonly events: TenantEvents;
  private readonly metricsReport: MetricsReport;
  private readonly metricsHistory: MetricsHistory;
  private readonly nodes: NodeDirectory;
  private readonly drain: NodeDrain;
  /** The configured node, reached directly for its heartbeat. */
  private readonly configuredNode: NodeClient | null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private configuredNodeId: string | null = null;
  private readonly metrics = new Metrics();
  private readonly maintenance: Maintenance;
  private readonly checkpoints: SessionCheckpointService;
  private readonly pauser: SessionPauser;
  private readonly egress: EgressService;
  private readonly auth: Authenticator;
  private readonly limits: TenantLimits;
  private readonly templates: PublicApiDeps['templates'];
  private readonly lifecycle: LifecycleQueue;
  private server: Server | null = null;
  private e2b: E2bApi | null = null;
  port = 0;

  private readonly log: (message: string) => void;

  constructor(private readonly options: ControlPlaneOptions) {
    this.log = options.log ?? ((m) => process.stderr.write(`${m}\n`));
    this.auth = new Authenticator(options.store);
    this.limits = new TenantLimits(this.auth, options.store, this.metrics, { ...defaultTenantLimits, ...options.tenantLimits });
    // Recorded in the store so that no control plane stops a session another one is serving.
    const activity = new Activity(Date.now, recordActivityIn(options.store));
    // A control plane is known by its host and port (two live ones cannot share both); on a random port, by nothing lasting.
    const seat = options.sharedStore ? (options.port ? `${hostname()}:${options.port}` : '') : 'local';
    const lifecycle = new LifecycleQueue(options.store, this.log, { seat, ...(options.lifecycleWaitMs ? { waitMs: options.lifecycleWaitMs } : {}) });
    this.lifecycle = lifecycle;
    this.nodes = new NodeDirectory({
      store: options.store,
      cipher: options.secrets,
      lostAfterMs: (options.nodeLostAfterSec ?? 10) * 1000,
    });
    this.configuredNode = options.node ? new NodeClient('configured', options.node.url, options.node.token) : null;
    const shipper = new CheckpointShipper({
      store: options.store,
      nodes: this.nodes,
      metrics: this.metrics,
      log: this.log,
      enabled: Boolean(options.objectStore),
    });
    const taker = new CheckpointTaker(options.store, this.nodes, this.metrics, shipper);
    const mover = new SessionMover({ store: options.store, nodes: this.nodes, shipper, taker, metrics: this.metrics, log: this.log });
    const egress = new EgressService(options.store, this.nodes, options.secrets, this.log);
    this.egress = egress;
    const catalog = new TemplateCatalog(options.store);
    this.volumes = new VolumeService(options.store, this.nodes);
    this.events = new TenantEvents(options.store);
    this.metricsReport = new MetricsReport({ store: options.store, nodes: this.nodes, metrics: this.metrics, limits: this.limits });
    this.metricsHistory = new MetricsHistory(this.metricsReport);
    this.sessions = new SessionService({
      store: options.store,
      nodes: this.nodes,
      metrics: this.metrics,
      taker,
      activity,
      egress,
      lifecycle,
      limits: this.limits,
      templates: catalog,
      shipper,
      mover,
      volumes: this.volumes,
      defaultDiskGb: options.defaultDiskGb ?? 10,
    });
    this.drain = new NodeDrain({ store: options.store, nodes: this.nodes, lifecycle, mover, sessions: this.sessions, log: this.log });
    this.calls = new SessionCalls(options.store, this.sessions, lifecycle, activity);
    this.checkpoints = new SessionCheckpointService(options.store, this.nodes, this.sessions, taker, this.metrics, this.limits, shipper, this.volumes);
    const keepAutomatic = options.keepAutomaticCheckpoints ?? 5;
    this.pauser = new SessionPauser({
      store: options.store,
      nodes: this.nodes,
      sessions: this.sessions,
      checkpoints: this.checkpoints,
      metrics: this.metrics,
      keepAutomatic,
    });
    const templateService = new TemplateService(options.store, this.nodes, this.checkpoints, catalog);
    const maxContextBytes = (options.templateMaxContextMb ?? 64) * 1024 * 1024;
    const builds = new TemplateBuilds(
      {
        store: options.store,
        sessions: this.sessions,
        checkpoints: this.checkpoints,
        templates: templateService,
        catalog,
        auth: this.auth,
        apiUrl: () => `http://${loopbackHost(this.options.host)}:${this.port}`,
        log: this.log,
      },
      { maxContextBytes, cacheEntries: 64 },
    );
    this.templates = { catalog, service: templateService, builds, maxContextBytes };
    this.maintenance = new Maintenance({
      store: options.store,
      taker,
      nodes: this.nodes,
      shipper,
      sessions: this.sessions,
      checkpoints: this.checkpoints,
      pauser: this.pauser,
      activity,
      lifecycle,
      egress,
      builds,
      metrics: this.metrics,
      log: this.log,
      keepAutomatic,
      fullCheckpointPauseShare: options.fullCheckpointPauseShare ?? 0.02,
    });
  }

  async start(): Promise<void> {
    await this.auth.installAdminKey(this.options.adminKey);
    if (this.configuredNode) {
      // The node says which it is; sessions and templates from before nodes were recorded are its.
      const health = await this.configuredNode.health().catch((err: Error) => {
        throw new Error(`the node at ${this.options.node?.url} does not answer: ${err.message}`);
      });
      this.configuredNodeId = health.nodeId;
      this.nodes.setConfiguredNode(health.nodeId);
      await this.options.store.adoptUnplaced(health.nodeId);
      await this.heartbeatForConfiguredNode();
      this.heartbeatTimer = setInterval(() => void this.heartbeatForConfiguredNode(), heartbeatEveryMs);
      this.heartbeatTimer.unref();
    }
    // With other control planes on the store, a checkpoint it does not know yet may be one they are recording.
    const orphans = await this.checkpoints.removeOrphans(this.options.sharedStore ? orphanGraceMs : 0).catch((err: Error) => {
      this.log(`could not look for orphaned checkpoints: ${err.message}`);
      return 0;
    });
    if (orphans) this.log(`removed ${orphans} checkpoint(s) a crash left unrecorded`);
    // Operations a predecessor died in the middle of hold their sessions until their leases expire, unless released here.
    const released = await this.lifecycle.releasePredecessors(!this.options.sharedStore);
    if (released) this.log(`released ${released} session lease(s) a previous control plane here held when it stopped`);
    await this.maintenance.reconcileAll();
    const api = createPublicApi({
      auth: this.auth,
      sessions: this.sessions,
      calls: this.calls,
      checkpoints: this.checkpoints,
      pauser: this.pauser,
      services: new SessionServices(this.sessions, this.options.store, this.nodes),
      store: this.options.store,
      nodes: this.nodes,
      drain: this.drain,
      egress: this.egress,
      log: lineLog(this.log),
      limits: this.limits,
      templates: this.templates,
      volumes: this.volumes,
      preview: { domain: this.options.preview?.domain ?? null, maxConnectionsPerSession: this.options.preview?.maxConnectionsPerSession ?? 64 },
      events: this.events,
      metricsReport: this.metricsReport,
      metricsHistory: this.metricsHistory,
    });
    // E2B's API and MCP, translated onto this one over loopback with the callers' own keys.
    const selfUrl = () => `http://${loopbackHost(this.options.host)}:${this.port}`;
    this.e2b = createE2bApi({ apiUrl: selfUrl, log: this.log });
    api.mount(e2bPrefix, this.e2b.handle);
    api.mount(mcpPath, createMcpHttpApi({ apiUrl: selfUrl, checkKey: (req) => this.auth.authenticate(req) }));
    // The web console: static files and its sign-in; it calls this API from the browser with the user's key, kept in a cookie.
    api.mount(consolePath, consoleWithSignIn(this.auth, createConsoleHandler()));
    const { server, port } = await listen(api, this.options.host, this.options.port);
    this.server = server;
    this.port = port;
    this.maintenance.start(this.options.maintenanceTickMs ?? 5000);
    this.metricsHistory.start();
  }

  /** The node agent stopped every sandbox (the platform shuts down): sessions show none until their next call. */
  nodeStopped(): Promise<void> {
    return this.configuredNodeId ? this.sessions.nodeStopped(this.configuredNodeId) : Promise.resolve();
  }

  async stop(): Promise<void> {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    await this.maintenance.stop();
    this.e2b?.close();
    this.events.stop();
    this.metricsHistory.stop();
    if (this.server) await closeServer(this.server);
    this.server = null;
    this.nodes.close();
    this.configuredNode?.close();
  }

  /** Registers the configured node and keeps it alive in the store from its health; a node that does not answer misses the beat. */
  private async heartbeatForConfiguredNode(): Promise<void> {
    const node = this.options.node;
    if (!node || !this.configuredNode) return;
    try {
      const health = await this.configuredNode.health();
      await this.nodes.heartbeat({ id: health.nodeId, url: node.url, token: node.token, capacity: health.capacity, sandboxes: health.sandboxes });
    } catch (err) {
      this.log(`the node at ${node.url} missed a heartbeat: ${(err as Error).message}`);
    }
  }
}
