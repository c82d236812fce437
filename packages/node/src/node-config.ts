import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { availableParallelism, totalmem } from 'node:os';
import { type NodeCapacity, newId } from '@space/protocol';
import { type SettingValues, otlpTracesUrl, readSettings, sharedSettings } from '@space/server-kit';
import { nodeSettings } from './node-settings.js';
import type { GvisorOptions } from './runtime/gvisor-driver.js';
import type { WarmPoolConfig } from './warm-pool.js';
import type { WritebackBound } from './storage/btrfs-volume.js';
import { type ObjectStore, objectStoreFrom } from './storage/object-store.js';

export interface NodeConfig {
  /** Data directory of this node agent (`SPACE_DATA_DIR`). */
  dataDir: string;
  /** Address the node API listens on (`SPACE_NODE_HOST`). */
  host: string;
  /** Port of the node API (`SPACE_NODE_PORT`; a free port when embedded in `space up`). */
  port: number;
  /** Token the control plane presents (`SPACE_NODE_TOKEN`, else generated into `<data>/node/token`). */
  token: string;
  /**
   * The node API's certificate and key (PEM), issued by the cluster CA when the node joined: served
   * over HTTPS; with the CA (`clientCa`), to control planes presenting a certificate of it only.
   */
  tls?: { cert: string; key: string; clientCa?: string };
  nodeId: string;
  /** What the node offers to placement (`SPACE_NODE_MEMORY_MB`, `SPACE_NODE_CPUS`; the host's by default). */
  capacity: NodeCapacity;
  /** Size of the sparse btrfs image created on first start (`SPACE_VOLUME_SIZE_GB`). */
  volumeSizeGb: number;
  /** Below this much free on the image's host filesystem, new sessions and full checkpoints are refused (`SPACE_HOST_DISK_RESERVE_MB`; 0: never). */
  hostDiskReserveMb: number;
  /** Dirty data and commit interval of that filesystem (`SPACE_VOLUME_DIRTY_MB`, `SPACE_VOLUME_COMMIT_SEC`). */
  writeback: WritebackBound;
  /** Host memory full checkpoints' images may take at once while their sandboxes are paused (`SPACE_CHECKPOINT_STAGING_MB`; 0: written to the volume). */
  imageStagingMb: number;
  /** Where `base` is bootstrapped from (`SPACE_DEBIAN_MIRROR`); null: the mirror of apt's own sources. */
  debianMirror: string | null;
  /** The built agent and helpers that every sandbox mounts (packages/agent/dist). */
  sandboxRuntimeBuildDir: string;
  runtime: GvisorOptions;
  /** Warm pool settings; `templates: null` pools every template prepared at start. */
  pool: Omit<WarmPoolConfig, 'templates'> & { templates: string[] | null };
  gateway: GatewayConfig;
  /** Where checkpoints are stored for other nodes (`SPACE_OBJECT_STORE`); null: they stay on this node only. */
  objectStore: ObjectStore | null;
  /** How often usage is sampled and a batch closed (`SPACE_USAGE_SAMPLE_SEC`). */
  usageSampleMs: number;
  /** The disk limit of a session that names none (`SPACE_SESSION_DISK_GB`): pooled volumes get it ahead. */
  defaultDiskGb: number;
  /** Where the node API's traces go (`OTEL_EXPORTER_OTLP_ENDPOINT`); null: nothing is traced. */
  tracesUrl: string | null;
}

export interface GatewayConfig {
  /** The cluster's gateway CA (`SPACE_GATEWAY_CA_DIR`): the same on every node. */
  caDir: string;
  /** Test only (`SPACE_GATEWAY_TEST_HOSTS=name=ip:port,...`): host names sent to a fixed address. */
  testHosts: Map<string, { address: string; port: number }>;
  /** Test only (`SPACE_GATEWAY_TEST_CA_FILE`): a CA the gateway trusts for those hosts. */
  testCaFile: string | null;
  /** Whether sandboxes may reach IPv6 addresses (`SPACE_EGRESS_IPV6=1`). */
  ipv6Egress: boolean;
  /** The longest the gateway keeps a DNS answer, whatever its TTL (`SPACE_GATEWAY_DNS_MAX_TTL`, seconds; 0: no cache). */
  dnsMaxTtlSeconds: number;
}

/** Parses `name=ip:port,...` (its shape checked by the setting). */
export function parseTestHosts(raw: string | undefined): Map<string, { address: string; port: number }> {
  const hosts = new Map<string, { address: string; port: number }>();
  for (const entry of (raw ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const [name, target] = entry.split('=') as [string, string];
    const [address, port] = target.split(':') as [string, string];
    hosts.set(name.toLowerCase(), { address, port: Number(port) });
  }
  return hosts;
}

/** Reads a value kept in a file, creating it with `make()` the first time. */
export async function persistentValue(file: string, make: () => string): Promise<string> {
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const value = make();
  await writeFile(file, `${value}\n`, { mode: 0o600 });
  return value;
}

/** The node agent's settings and the shared ones, read once at start (a bad value stops it, named). */
export type NodeSettings = SettingValues<typeof sharedSettings & typeof nodeSettings>;

export function readNodeSettings(env: NodeJS.ProcessEnv): NodeSettings {
  return readSettings({ ...sharedSettings, ...nodeSettings }, env);
}

export async function resolveNodeConfig(
  settings: NodeSettings,
  overrides: Partial<NodeConfig> & { sandboxRuntimeBuildDir: string },
  env: NodeJS.ProcessEnv = {},
): Promise<NodeConfig> {
  const dataDir = path.resolve(overrides.dataDir ?? settings.dataDir);
  const nodeDir = path.join(dataDir, 'node');
  return {
    dataDir,
    host: overrides.host ?? settings.nodeHost,
    port: overrides.port ?? settings.nodePort,
    token: overrides.token ?? settings.nodeToken ?? (await persistentValue(path.join(nodeDir, 'token'), () => randomBytes(32).toString('hex'))),
    nodeId: overrides.nodeId ?? settings.nodeId ?? (await persistentValue(path.join(nodeDir, 'node-id'), () => newId('node', 10))),
    capacity: overrides.capacity ?? {
      memoryMb: settings.memoryMb || Math.floor(totalmem() / 2 ** 20),
      cpus: settings.cpus || availableParallelism(),
    },
    volumeSizeGb: overrides.volumeSizeGb ?? settings.volumeSizeGb,
    hostDiskReserveMb: overrides.hostDiskReserveMb ?? settings.hostDiskReserveMb,
    writeback: overrides.writeback ?? { dirtyMb: settings.volumeDirtyMb, commitSec: settings.volumeCommitSec },
    imageStagingMb: overrides.imageStagingMb ?? settings.checkpointStagingMb,
    debianMirror: overrides.debianMirror !== undefined ? overrides.debianMirror : (settings.debianMirror ?? null),
    sandboxRuntimeBuildDir: overrides.sandboxRuntimeBuildDir,
    runtime: overrides.runtime ?? { platform: settings.runscPlatform, checkpointCompression: settings.checkpointCompression },
    pool: overrides.pool ?? {
      size: settings.poolSize,
      templates: settings.poolTemplates,
      maxMemoryMb: settings.poolMaxMemoryMb,
      sandboxMemoryMb: settings.poolSandboxMemoryMb,
      demandMemoryMs: settings.poolDemandMemorySec * 1000,
      refillDelayMs: settings.poolRefillDelayMs,
      templateImages: settings.templateImages,
    },
    objectStore:
      overrides.objectStore !== undefined
        ? overrides.objectStore
        : objectStoreFrom(settings, env, settings.s3CaFile ? await readFile(settings.s3CaFile, 'utf8') : undefined),
    usageSampleMs: overrides.usageSampleMs ?? settings.usageSampleSec * 1000,
    defaultDiskGb: overrides.defaultDiskGb ?? settings.sessionDiskGb,
    tracesUrl: overrides.tracesUrl !== undefined ? overrides.tracesUrl : otlpTracesUrl(settings),
    gateway: overrides.gateway ?? {
      caDir: path.resolve(settings.gatewayCaDir ?? path.join(dataDir, 'gateway-ca')),
      testHosts: parseTestHosts(settings.gatewayTestHosts),
      testCaFile: settings.gatewayTestCaFile ? path.resolve(settings.gatewayTestCaFile) : null,
      ipv6Egress: settings.egressIpv6,
      dnsMaxTtlSeconds: settings.gatewayDnsMaxTtl,
    },
  };
}
