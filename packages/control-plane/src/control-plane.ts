import { hostname } from 'node:os';
import type { Server } from 'node:http';
import { StopSteps, type Tracing, closeServer, listen, otlpTracesUrl, startTracing } from '@space/server-kit';
import { type E2bApi, createE2bApi, e2bPrefix } from '@space/e2b';
import { createMcpHttpApi, mcpPath } from '@space/mcp';
import { consolePath, createConsoleHandler } from '@space/console';
import { consoleWithSignIn } from './api/console-session.js';
import { createPublicApi } from './api/public-api.js';
import { NodeClient } from './cluster/node-client.js';
import type { Store } from './store/store.js';
import type { SecretCipher } from './store/secret-cipher.js';
import type { ControlPlaneSettings } from './settings.js';
import { type ServiceGraph, publicApiDeps, wireServices } from './service-graph.js';
import type { ClusterTls } from './tenants/control-plane-certificate.js';
import type { KeyWrap } from './checkpoints/data-keys.js';

export interface ControlPlaneOptions {
  /** Its settings (`readControlPlaneSettings`): address, store, tunables, limits. */
  settings: ControlPlaneSettings;
  adminKey: string;
  store: Store;
  /**
   * The node this control plane runs with (`space up`, or `SPACE_NODE_URL`): registered by the
   * control plane on its behalf. Without one, only nodes that register themselves serve sessions.
   */
  node?: { url: string; token: string };
  /** Encrypts secret values in the store. */
  secrets: SecretCipher;
  /**
   * The cluster CA (`SPACE_CLUSTER_CA_DIR`), which signs the certificates of nodes that join (calls
   * to nodes check them), and the client certificate this control plane presents to them.
   */
  clusterTls?: ClusterTls | null;
  /** A KMS that wraps the tenants' data keys (checkpoint objects are sealed with them); the secrets key wraps them otherwise. */
  keyWrap?: KeyWrap;
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
  private readonly services: ServiceGraph;
  /** The configured node, reached directly for its heartbeat. */
  private readonly configuredNode: NodeClient | null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private configuredNodeId: string | null = null;
  private server: Server | null = null;
  /** Traces of the API's calls, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set. */
  private tracing: Tracing | null = null;
  private e2b: E2bApi | null = null;
  port = 0;

  private readonly log: (message: string) => void;

  constructor(private readonly options: ControlPlaneOptions) {
    this.log = options.log ?? ((m) => process.stderr.write(`${m}\n`));
    const { settings } = options;
    // A control plane is known by its host and port (two live ones cannot share both); on a random port, by nothing lasting.
    const seat = this.sharedStore ? (settings.port ? `${hostname()}:${settings.port}` : '') : 'local';
    this.services = wireServices({
      store: options.store,
      secrets: options.secrets,
      settings,
      log: this.log,
      apiUrl: () => this.selfUrl(),
      seat,
      clusterTls: options.clusterTls ?? null,
      ...(options.keyWrap ? { keyWrap: options.keyWrap } : {}),
    });
    this.configuredNode = options.node ? new NodeClient('configured', options.node.url, options.node.token) : null;
  }

  /** Other control planes share the store (PostgreSQL): checkpoints unknown to it may be on their way in, even at start. */
  private get sharedStore(): boolean {
    return this.options.settings.databaseUrl !== undefined;
  }

  /** How this process reaches its own API: E2B, MCP and template builds call it over loopback. */
  private selfUrl(): string {
    return `http://${loopbackHost(this.options.settings.host)}:${this.port}`;
  }

  async start(): Promise<void> {
    const s = this.services;
    await s.auth.installAdminKey(this.options.adminKey);
    this.options.clusterTls?.certificate.startRenewal();
    if (this.configuredNode) {
      // The node says which it is; sessions and templates from before nodes were recorded are its.
      const health = await this.configuredNode.health().catch((err: Error) => {
        throw new Error(`the node at ${this.options.node?.url} does not answer: ${err.message}`);
      });
      this.configuredNodeId = health.nodeId;
      s.nodes.setConfiguredNode(health.nodeId);
      await this.options.store.adoptUnplaced(health.nodeId);
      await this.heartbeatForConfiguredNode();
      this.heartbeatTimer = setInterval(() => void this.heartbeatForConfiguredNode(), heartbeatEveryMs);
      this.heartbeatTimer.unref();
    }
    // With other control planes on the store, a checkpoint it does not know yet may be one they are recording.
    const orphans = await s.checkpoints.removeOrphans(this.sharedStore ? orphanGraceMs : 0).catch((err: Error) => {
      this.log(`could not look for orphaned checkpoints: ${err.message}`);
      return 0;
    });
    if (orphans) this.log(`removed ${orphans} checkpoint(s) a crash left unrecorded`);
    // Operations a predecessor died in the middle of hold their sessions until their leases expire, unless released here.
    const released = await s.lifecycle.releasePredecessors(!this.sharedStore);
    if (released) this.log(`released ${released} session lease(s) a previous control plane here held when it stopped`);
    await s.maintenance.reconcileAll();
    const { settings } = this.options;
    this.tracing = startTracing(otlpTracesUrl(settings), 'space-control-plane', this.log);
    const api = createPublicApi({ ...publicApiDeps(s, settings, this.log), tracer: this.tracing?.tracer ?? null });
    // E2B's API and MCP, translated onto this one over loopback with the callers' own keys.
    const selfUrl = () => this.selfUrl();
    this.e2b = createE2bApi({ apiUrl: selfUrl, log: this.log });
    api.mount(e2bPrefix, this.e2b.handle);
    api.mount(mcpPath, createMcpHttpApi({ apiUrl: selfUrl, checkKey: (req) => s.auth.authenticate(req) }));
    // The web console: static files and its sign-in; it calls this API from the browser with the user's key, kept in a cookie.
    api.mount(consolePath, consoleWithSignIn(s.auth, createConsoleHandler()));
    const { server, port } = await listen(api, settings.host, settings.port);
    this.server = server;
    this.port = port;
    await s.roster.beat().catch((err: Error) => this.log(`control plane roster not updated: ${err.message}`));
    s.roster.start();
    s.maintenance.start(settings.maintenanceTickMs);
    s.metricsHistory.start();
  }

  /** The node agent stopped every sandbox (the platform shuts down): sessions show none until their next call. */
  nodeStopped(): Promise<void> {
    return this.configuredNodeId ? this.services.sessions.nodeStopped(this.configuredNodeId) : Promise.resolve();
  }

  async stop(): Promise<void> {
    const s = this.services;
    const steps = new StopSteps(this.log);
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    await steps.step('the maintenance pass under way', () => s.maintenance.stop());
    // Left at once: the other control planes take this one's share of the sessions at their next beat.
    await steps.step('the roster (leaving it)', () => s.roster.leave());
    this.options.clusterTls?.certificate.stop();
    s.cells.close();
    this.e2b?.close();
    s.events.stop();
    s.metricsHistory.stop();
    const server = this.server;
    if (server) await steps.step('the API server to close', () => closeServer(server));
    this.server = null;
    await steps.step("the heartbeats' follow-ups", () => s.heartbeats.settle());
    // The last uses seen, for the other control planes' idle sweeps.
    await steps.step('the last uses to be written', () => s.activity.flush());
    s.nodes.close();
    this.configuredNode?.close();
    await this.tracing?.exporter.stop();
  }

  /** Registers the configured node and keeps it alive in the store from its health; a node that does not answer misses the beat. */
  private async heartbeatForConfiguredNode(): Promise<void> {
    const node = this.options.node;
    if (!node || !this.configuredNode) return;
    try {
      const health = await this.configuredNode.health();
      const { nodeId: id, capacity, sandboxes, egressUnconfigured, usageBatches, storage } = health;
      await this.services.heartbeats.receive({
        id,
        url: node.url,
        token: node.token,
        capacity,
        sandboxes,
        egressUnconfigured,
        usageBatches,
        ...(storage.status !== 'ok' ? { storage: storage.status } : {}),
      });
    } catch (err) {
      this.log(`the node at ${node.url} missed a heartbeat: ${(err as Error).message}`);
    }
  }
}
