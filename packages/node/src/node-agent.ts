import { SandboxMetricsReader } from './sandbox/sandbox-metrics.js';
import type { NodeHeartbeat } from '@space/protocol';
import type { Server } from 'node:http';
import type { Server as TlsServer } from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KeyedQueue, StopSteps, type Tracing, closeServer, listen, serverTlsOptions, startTracing } from '@space/server-kit';
import { createNodeApi } from './api/node-api.js';
import type { Logger } from './logger.js';
import { IpLeases } from './network/ip-leases.js';
import { SandboxNetwork } from './network/sandbox-network.js';
import type { NodeConfig } from './node-config.js';
import { GvisorDriver } from './runtime/gvisor-driver.js';
import { prepareRuntimeDir } from './runtime/sandbox-runtime-dir.js';
import { SandboxRecords } from './sandbox-record.js';
import { DataDirLock } from './data-dir-lock.js';
import { NodeCheckpointService } from './node-checkpoint-service.js';
import { DaemonLink } from './sandbox/daemon-link.js';
import { LiveSandboxes } from './sandbox/live-sandboxes.js';
import { PooledSandboxes } from './sandbox/pooled-sandboxes.js';
import { reconcileSandboxes } from './sandbox/reconcile.js';
import { SandboxBooter } from './sandbox/sandbox-booter.js';
import { SandboxManager } from './sandbox/sandbox-manager.js';
import { SandboxMemory } from './sandbox/sandbox-memory.js';
import { SandboxStarter } from './sandbox/sandbox-starter.js';
import { SessionVolumes } from './sandbox/session-volumes.js';
import { CheckpointFiles } from './storage/checkpoint-files.js';
import { CheckpointStore } from './storage/checkpoint-store.js';
import { NamedVolumes } from './storage/named-volumes.js';
import { CheckpointShipping } from './storage/checkpoint-shipping.js';
import { BtrfsVolume } from './storage/btrfs-volume.js';
import { HostDiskWatch } from './storage/host-disk.js';
import { ImageStaging } from './storage/image-staging.js';
import { Subvolumes } from './storage/subvolumes.js';
import { Spawner } from './spawner.js';
import { builtinRecipes, type Progress } from './templates/recipes.js';
import { TemplateStore } from './templates/template-store.js';
import { WarmPool } from './warm-pool.js';
import { TemplateImages } from './template-images.js';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { SandboxFirewall } from './network/sandbox-firewall.js';
import { AuditLog } from './gateway/audit-log.js';
import { DnsResponder } from './gateway/dns-responder.js';
import { EgressGateway } from './gateway/egress-gateway.js';
import { EgressRules } from './gateway/egress-rules.js';
import { GatewayCa } from './gateway/gateway-ca.js';
import { Resolver, lookup } from 'node:dns/promises';
import { DnsCache } from './gateway/dns-cache.js';
import { MemoryWatch } from './sandbox/memory-watch.js';
import { CgroupMemoryReader, cgroupVersion } from './runtime/cgroup-usage.js';
import { NodeFence } from './node-fence.js';
import { PlacementEpochs } from './placement-epochs.js';
import { UsageLedger } from './usage/usage-ledger.js';
import { UsageMeter } from './usage/usage-meter.js';

/**
 * The gateway's DNS bounds: one try waits 1 s (the host resolver's default of 5 s is what stalled
 * npm's requests), two tries, and no request waits more than 3 s for a name.
 */
const dnsTryTimeoutMs = 1000;
const dnsTimeoutMs = 3000;

/** The node agent's composition root: wires storage, network, runtime and API, and owns their lifecycle. */
export class NodeAgent {
  readonly volume: BtrfsVolume;
  readonly templates: TemplateStore;
  private readonly staging: ImageStaging;
  private manager: SandboxManager | null = null;
  private starter: SandboxStarter | null = null;
  private pool: WarmPool | null = null;
  private gateway: EgressGateway | null = null;
  private shipping: CheckpointShipping | null = null;
  private dns: DnsResponder | null = null;
  private sweeper: NodeJS.Timeout | null = null;
  private memoryWatch: MemoryWatch | null = null;
  private hostDisk: HostDiskWatch | null = null;
  private fence: NodeFence | null = null;
  private usage: UsageMeter | null = null;
  /** Traces of the node API's calls, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set. */
  private tracing: Tracing | null = null;
  private readonly lock: DataDirLock;
  /** Runs the host commands of sandbox starts and stops, volumes and the firewall (spawner.ts). */
  private readonly commands = new Spawner(fileURLToPath(new URL('../dist-native/space-spawner', import.meta.url)));
  private readonly subvolumes = new Subvolumes(this.commands);
  private server: Server | null = null;
  port = 0;

  constructor(
    readonly config: NodeConfig,
    private readonly log: Logger,
  ) {
    this.volume = new BtrfsVolume(config.dataDir, config.volumeSizeGb, config.writeback);
    this.lock = new DataDirLock(config.dataDir);
    this.staging = new ImageStaging(config.dataDir, config.imageStagingMb * 2 ** 20);
    this.templates = new TemplateStore(this.volume, this.subvolumes, builtinRecipes, {
      cacheDir: path.join(config.dataDir, 'cache', 'templates'),
      debianMirror: config.debianMirror,
    });
  }

  get url(): string {
    return `${this.config.tls ? 'https' : 'http'}://${this.config.host === '0.0.0.0' ? '127.0.0.1' : this.config.host}:${this.port}`;
  }

  /**
   * This node as the cluster's control planes see it (its heartbeat); `advertiseUrl` when they reach
   * it by another address. `joining`: with the sessions it runs, for the control plane to name those
   * that moved away (see `stopMovedSessions`), and since when it is fenced if it is. While it has
   * any, the sessions whose egress settings it lacks and the usage batches it holds: the control
   * plane that takes the beat sends the first and collects the second (no control plane asks every
   * node for them).
   */
  heartbeat(advertiseUrl: string | null = null, joining = false): NodeHeartbeat {
    const { nodeId, token, capacity } = this.config;
    const egressUnconfigured = this.manager?.egressUnconfigured() ?? [];
    const usageBatches = this.usage?.pendingBatches ?? 0;
    const storage = this.hostDisk?.state.status ?? 'ok';
    return {
      id: nodeId,
      url: advertiseUrl ?? this.url,
      token,
      capacity,
      sandboxes: this.manager?.count() ?? 0,
      ...(joining ? { sessions: (this.manager?.list() ?? []).map((s) => s.sessionId) } : {}),
      ...(joining && this.fence?.fencedSince ? { fencedSince: this.fence.fencedSince } : {}),
      ...(egressUnconfigured.length > 0 ? { egressUnconfigured } : {}),
      ...(usageBatches > 0 ? { usageBatches } : {}),
      ...(storage !== 'ok' ? { storage } : {}),
    };
  }

  /**
   * Stops the sandboxes of sessions that moved to another node while this one was away (lost to the
   * control planes): a session never runs in two places once the node is back. Their volumes stay
   * (a control plane rescues what they hold into a checkpoint, then deletes them).
   */
  async stopMovedSessions(sessionIds: string[]): Promise<void> {
    const moved = new Set(sessionIds);
    for (const sandbox of this.manager?.list() ?? []) {
      if (!moved.has(sandbox.sessionId)) continue;
      await this.manager!.kill(sandbox.sandboxId);
      this.log.warn(`stopped sandbox ${sandbox.sandboxId}: session ${sandbox.sessionId} moved to another node while this node was away`);
    }
  }

  /** Cut off from every control plane: pauses every sandbox and refuses their egress and the node API's calls (`NodeFence`). */
  async fenceSelf(): Promise<void> {
    await this.fence?.fence();
  }

  /** Heard again (and the sessions that moved away stopped): resumes what the fence paused. */
  async liftFence(): Promise<void> {
    await this.fence?.lift();
  }

  /** Mounts storage, adopts or cleans up what a previous run left, and starts serving. */
  async start(options: { templates?: string[]; progress?: Progress } = {}): Promise<void> {
    const { config, log } = this;
    if (!existsSync(this.commands.binary)) throw new Error(`${this.commands.binary} is missing: run "npm run build" (./space does it)`);
    const shim = fileURLToPath(new URL('../dist-native/space-shim', import.meta.url));
    const driver = new GvisorDriver(path.join(config.dataDir, 'node', 'runsc'), shim, config.runtime, this.commands);
    const runtimeVersion = await driver.preflight();
    await this.lock.acquire();
    log.info(`volume: ${await this.volume.mount()}`);
    const hostDisk = new HostDiskWatch({
      image: await this.volume.backingImage(),
      readOnly: () => this.volume.isReadOnly(),
      reserveBytes: config.hostDiskReserveMb * 2 ** 20,
      log,
    });
    this.hostDisk = hostDisk;
    log.info(`host disk: ${await hostDisk.start(config.volumeSizeGb * 2 ** 30)}`);
    log.info(`memory images: ${await this.staging.prepare()}`);
    const runtimeDir = await prepareRuntimeDir(path.join(config.dataDir, 'node', 'runtime'), config.sandboxRuntimeBuildDir, runtimeVersion);
    const leases = new IpLeases();
    await leases.releaseWhere((owner) => {
      const [dataDir, netns] = owner.split(' ');
      return dataDir === config.dataDir && !!netns && !SandboxNetwork.exists(netns);
    });
    // The gateway listens before any sandbox exists: the firewall rules of each link name its ports.
    const ca = new GatewayCa(config.gateway.caDir);
    await ca.load();
    const sourceOf = (ip: string) => this.manager?.sourceOf(ip) ?? null;
    if (config.gateway.testHosts.size)
      log.warn(`egress gateway test settings in use (SPACE_GATEWAY_TEST_HOSTS): ${[...config.gateway.testHosts.keys()].join(', ')}; not for production`);
    const dnsCache = new DnsCache({
      resolver: new Resolver({ timeout: dnsTryTimeoutMs, tries: 2 }),
      fallback: async (host) => (await lookup(host, { all: true })).map((a) => a.address),
      ipv6: config.gateway.ipv6Egress,
      maxTtlSeconds: config.gateway.dnsMaxTtlSeconds,
      timeoutMs: dnsTimeoutMs,
    });
    this.gateway = new EgressGateway({
      ca,
      rules: new EgressRules((host) => dnsCache.lookUp(host), { ipv6: config.gateway.ipv6Egress }),
      audit: new AuditLog(path.join(config.dataDir, 'node', 'egress-audit')),
      sourceOf,
      test: { hosts: config.gateway.testHosts, caPem: config.gateway.testCaFile ? await readFile(config.gateway.testCaFile, 'utf8') : null },
      metered: (sessionId, entry) => this.usage?.egress(sessionId, entry),
      log,
    });
    await this.gateway.start();
    log.info(`egress gateway on HTTP ${this.gateway.httpPort}, HTTPS ${this.gateway.httpsPort}`);
    this.dns = new DnsResponder((ip) => sourceOf(ip) !== null);
    await this.dns.start();
    const firewall = new SandboxFirewall({ dns: this.dns.port, http: this.gateway.httpPort, https: this.gateway.httpsPort }, this.commands);
    const network = new SandboxNetwork(leases, firewall, this.commands);
    await network.removeStaleRules();
    const checkpointStore = new CheckpointStore(this.volume, this.subvolumes);
    const sessionQueue = new KeyedQueue();
    const records = new SandboxRecords(path.join(config.dataDir, 'node', 'sandboxes'));
    const live = new LiveSandboxes(config.nodeId);
    const link = new DaemonLink(driver);
    const volumes = new SessionVolumes(this.volume, this.subvolumes, this.templates, ca.certificatePem, log);
    const namedVolumes = new NamedVolumes(this.volume, this.subvolumes, checkpointStore, log);
    await namedVolumes.removeLeftovers();
    const usageLedger = await UsageLedger.open(path.join(config.dataDir, 'node', 'usage'));
    const usage = new UsageMeter({
      live,
      cgroup: (id) => driver.usage(id),
      volumeBytes: () => volumes.bytesBySession(),
      ledger: usageLedger,
      sampleMs: config.usageSampleMs,
      log,
    });
    this.usage = usage;
    const booter = new SandboxBooter({
      owner: config.dataDir,
      driver,
      network,
      egress: this.gateway,
      records,
      link,
      runtimeDir,
      namedVolumes,
      volumes,
      usage,
      log,
    });
    const { adopted, removed } = await reconcileSandboxes({ records, driver, network, link, booter, volumes, live, log });
    if (adopted || removed) log.info(`reconciled: adopted ${adopted} running sandbox(es), removed ${removed} dead one(s)`);
    this.manager = new SandboxManager({ nodeId: config.nodeId, driver, live, booter, link, volumes, sessionQueue, egress: this.gateway, log });
    const shipping = new CheckpointShipping({
      volume: this.volume,
      checkpoints: checkpointStore,
      subvolumes: this.subvolumes,
      objects: config.objectStore,
      log,
    });
    this.shipping = shipping;
    const partial = await shipping.removePartialReceives();
    if (partial) log.info(`removed ${partial} checkpoint(s) an interrupted fetch left half received`);
    const incomplete = await checkpointStore.removeIncomplete();
    if (incomplete) log.info(`removed ${incomplete} memory image(s) left incomplete by a crash`);
    // Commands the crashed agent had started (runsc checkpoint) may finish after this start.
    this.sweeper = setInterval(() => void checkpointStore.removeIncomplete(10 * 60_000).catch(() => undefined), 10 * 60_000);
    this.sweeper.unref();
    this.memoryWatch = new MemoryWatch({ live, link, memory: new CgroupMemoryReader(cgroupVersion()), log });
    this.memoryWatch.start();
    usage.start();
    for (const name of options.templates ?? []) await this.templates.ensure(name, options.progress ?? ((m) => log.info(m)));
    const poolTemplates = config.pool.templates ?? options.templates ?? [];
    for (const name of poolTemplates) await this.templates.ensure(name, options.progress ?? ((m) => log.info(m)));
    const pooled = new PooledSandboxes({
      manager: this.manager,
      live,
      volumes,
      link,
      driver,
      records,
      runtimeDir,
      usage,
      defaultDiskGb: config.defaultDiskGb,
      log,
    });
    const images = new TemplateImages(this.volume.dir('template-images'), this.subvolumes, pooled, log);
    await images.clear();
    this.pool = new WarmPool({ ...config.pool, templates: poolTemplates }, pooled, config.pool.templateImages ? images : null, log, async () =>
      this.starter?.settle(),
    );
    this.pool.start();
    this.starter = new SandboxStarter({
      manager: this.manager,
      pooled,
      volumes,
      namedVolumes,
      pool: this.pool,
      sessionQueue,
      egress: this.gateway,
      hostDisk,
      log,
    });
    const manager = this.manager;
    const checkpoints = new NodeCheckpointService({
      manager,
      memory: new SandboxMemory({ driver, records, live, link, egress: this.gateway, runtimeDir, stop: (id) => manager.stop(id), log }),
      volumes,
      store: checkpointStore,
      namedVolumes,
      staging: this.staging,
      writeback: this.volume,
      hostDisk,
      sessionQueue,
      runtimeDir,
      log,
    });
    this.fence = new NodeFence({
      sandboxIds: () => manager.list().map((s) => s.sandboxId),
      pause: (id) => driver.pause(id),
      resume: (id) => driver.resume(id),
      gateway: this.gateway,
      log,
    });
    this.tracing = startTracing(config.tracesUrl, 'space-node', (m) => log.warn(m));
    const api = createNodeApi({
      tracer: this.tracing?.tracer ?? null,
      nodeId: config.nodeId,
      capacity: config.capacity,
      token: config.token,
      manager: this.manager,
      metrics: new SandboxMetricsReader(this.manager, driver, volumes),
      starter: this.starter,
      pool: this.pool,
      checkpoints,
      checkpointFiles: new CheckpointFiles((id) => checkpointStore.snapshotRoot(id)),
      namedVolumes,
      shipping,
      templates: this.templates,
      gateway: this.gateway,
      hostDisk,
      fence: this.fence,
      placements: await PlacementEpochs.open(
        path.join(config.dataDir, 'node', 'placement-epochs.log'),
        path.join(config.dataDir, 'node', 'placement-epochs.json'),
      ),
      usage: usageLedger,
      log,
    });
    if (config.tls && !config.tls.clientCa)
      log.warn(
        'the node API takes calls from any client with the node token: this node joined before control planes had client certificates; join it again for mutual TLS (deploy.md, "The cluster CA")',
      );
    const tls = config.tls ? { ...config.tls, onRefused: (reason: string) => log.warn(`node API: ${reason}`) } : undefined;
    const { server, port } = await listen(api, config.host, config.port, {}, tls);
    this.server = server;
    this.port = port;
    log.info(`node ${config.nodeId} serving the node API on ${this.url}`);
  }

  /** Serves the node API with a renewed certificate (and CA) from the next connection on; open ones go on. */
  serveTls(tls: { cert: string; key: string; clientCa?: string }): void {
    if (!this.server || !('setSecureContext' in this.server)) throw new Error('the node API is not served over HTTPS');
    (this.server as TlsServer).setSecureContext(serverTlsOptions(tls));
  }

  /** Stops every sandbox and unmounts storage: nothing of this node is left running or mounted. */
  async stop(): Promise<void> {
    const steps = new StopSteps((m) => this.log.warn(m));
    const server = this.server;
    if (server) await steps.step('the node API server to close', () => closeServer(server));
    this.server = null;
    // A template build under way (debootstrap, apt in a chroot) holds the storage busy: it is killed, not waited for.
    await steps.step('the template builds under way', () => this.templates.stop());
    // A send or receive under way holds a subvolume open: the storage could not be unmounted under it.
    await steps.step('the checkpoint transfers under way', () => this.shipping?.stop());
    this.shipping = null;
    if (this.sweeper) clearInterval(this.sweeper);
    this.memoryWatch?.stop();
    this.hostDisk?.stop();
    this.memoryWatch = null;
    // Whatever happens to the pool, the sandboxes below are still stopped and the storage unmounted.
    await steps.step('the warm pool', () => this.pool?.stop().catch((err: Error) => this.log.warn(`stopping the warm pool: ${err.message}`)));
    this.pool = null;
    await steps.step('the sandbox starts under way', () => this.starter?.settle());
    this.starter = null;
    await steps.step(`the sandboxes to stop (${this.manager?.count() ?? 0} serving sessions)`, () => this.manager?.stopAll());
    this.manager = null;
    // After the sandboxes' last readings: the open period goes into the ledger, sent after the next start.
    await steps.step('the usage ledger', () => this.usage?.stop());
    this.usage = null;
    await steps.step('the egress gateway', () => this.gateway?.stop());
    this.gateway = null;
    await this.dns?.stop();
    this.dns = null;
    // Only the owner of the data directory may unmount it (a refused second instance must not).
    if (this.lock.isHeld()) {
      await steps.step('the memory images staged', () => this.staging.clear());
      await steps.step('the storage to unmount', () => this.volume.unmount());
    }
    await this.lock.release();
    await this.tracing?.exporter.stop();
    this.tracing = null;
    await this.commands.stop();
  }
}
