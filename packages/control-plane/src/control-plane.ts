import type { Server } from 'node:http';
import { closeServer, lineLog, listen } from '@space/server-kit';
import { type PublicApiDeps, createPublicApi } from './api/public-api.js';
import { TemplateCatalog } from './template-catalog.js';
import { TemplateService } from './template-service.js';
import { Authenticator } from './auth.js';
import { NodeClient } from './node-client.js';
import { SessionService } from './session-service.js';
import { CheckpointTaker } from './checkpoint-taker.js';
import { SessionCheckpointService } from './session-checkpoint-service.js';
import { Activity, recordActivityIn } from './activity.js';
import { Maintenance } from './maintenance.js';
import { LifecycleQueue } from './lifecycle-queue.js';
import { SessionCalls } from './session-calls.js';
import { TenantLimits, defaultTenantLimits, type TenantLimitOptions } from './tenant-limits.js';
import { Metrics } from './metrics.js';
import type { Store } from './store/store.js';
import { EgressService } from './egress-service.js';
import type { SecretCipher } from './secret-cipher.js';

export interface ControlPlaneOptions {
  host: string;
  port: number;
  adminKey: string;
  store: Store;
  node: { id: string; url: string; token: string };
  /** Encrypts secret values in the store. */
  secrets: SecretCipher;
  /** Automatic checkpoints kept per session (`SPACE_CHECKPOINT_KEEP`, default 5). */
  keepAutomaticCheckpoints?: number;
  /** How often the maintenance pass runs, ms (`SPACE_MAINTENANCE_TICK_MS`, default 5000). */
  maintenanceTickMs?: number;
  /** How long a call waits for a session's lifecycle operations before SESSION_BUSY, ms (`SPACE_LIFECYCLE_WAIT_MS`, default 30000). */
  lifecycleWaitMs?: number;
  /** Per-tenant limits: sessions, creations, request rate, calls and streams open, checkpoint storage (defaults in tenant-limits.ts). */
  tenantLimits?: Partial<TenantLimitOptions>;
  /** Disk of a session that names none, GB (`SPACE_SESSION_DISK_GB`, default 10). */
  defaultDiskGb?: number;
  log?: (message: string) => void;
}

/** The control plane's composition root. It keeps nothing in memory that matters: the store does. */
export class ControlPlane {
  private readonly sessions: SessionService;
  private readonly calls: SessionCalls;
  private readonly node: NodeClient;
  private readonly metrics = new Metrics();
  private readonly maintenance: Maintenance;
  private readonly checkpoints: SessionCheckpointService;
  private readonly egress: EgressService;
  private readonly auth: Authenticator;
  private readonly limits: TenantLimits;
  private readonly templates: PublicApiDeps['templates'];
  private server: Server | null = null;
  port = 0;

  private readonly log: (message: string) => void;

  constructor(private readonly options: ControlPlaneOptions) {
    this.log = options.log ?? ((m) => process.stderr.write(`${m}\n`));
    this.auth = new Authenticator(options.store);
    this.limits = new TenantLimits(this.auth, options.store, this.metrics, { ...defaultTenantLimits, ...options.tenantLimits });
    // Recorded in the store so that no control plane stops a session another one is serving.
    const activity = new Activity(Date.now, recordActivityIn(options.store));
    const lifecycle = new LifecycleQueue(options.store, this.log, options.lifecycleWaitMs ? { waitMs: options.lifecycleWaitMs } : {});
    this.node = new NodeClient(options.node.id, options.node.url, options.node.token);
    const taker = new CheckpointTaker(options.store, this.node, this.metrics);
    const egress = new EgressService(options.store, this.node, options.secrets, this.log);
    this.egress = egress;
    const catalog = new TemplateCatalog(options.store);
    this.sessions = new SessionService({
      store: options.store,
      node: this.node,
      metrics: this.metrics,
      taker,
      activity,
      egress,
      lifecycle,
      limits: this.limits,
      templates: catalog,
      defaultDiskGb: options.defaultDiskGb ?? 10,
    });
    this.calls = new SessionCalls(options.store, this.sessions, lifecycle, activity);
    this.checkpoints = new SessionCheckpointService(options.store, this.node, this.sessions, taker, this.metrics, this.limits);
    this.templates = { catalog, service: new TemplateService(options.store, this.node, this.checkpoints, catalog) };
    this.maintenance = new Maintenance({
      store: options.store,
      node: this.node,
      sessions: this.sessions,
      checkpoints: this.checkpoints,
      activity,
      lifecycle,
      egress,
      metrics: this.metrics,
      log: this.log,
      keepAutomatic: options.keepAutomaticCheckpoints ?? 5,
    });
  }

  async start(): Promise<void> {
    await this.auth.installAdminKey(this.options.adminKey);
    const orphans = await this.checkpoints.removeOrphans().catch((err: Error) => {
      this.log(`could not look for orphaned checkpoints: ${err.message}`);
      return 0;
    });
    if (orphans) this.log(`removed ${orphans} checkpoint(s) a crash left unrecorded`);
    await this.maintenance.reconcileAll();
    const api = createPublicApi({
      auth: this.auth,
      sessions: this.sessions,
      calls: this.calls,
      checkpoints: this.checkpoints,
      store: this.options.store,
      metrics: this.metrics,
      node: this.node,
      egress: this.egress,
      log: lineLog(this.log),
      limits: this.limits,
      templates: this.templates,
    });
    const { server, port } = await listen(api, this.options.host, this.options.port);
    this.server = server;
    this.port = port;
    this.maintenance.start(this.options.maintenanceTickMs ?? 5000);
  }

  /** The node agent stopped every sandbox (the platform shuts down): sessions show none until their next call. */
  nodeStopped(): Promise<void> {
    return this.sessions.nodeStopped();
  }

  async stop(): Promise<void> {
    await this.maintenance.stop();
    if (this.server) await closeServer(this.server);
    this.server = null;
    this.node.close();
  }
}
