import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { availableParallelism, totalmem } from 'node:os';
import { type NodeCapacity, NodeIdSchema, newId } from '@space/protocol';
import type { GvisorOptions } from './runtime/gvisor-driver.js';
import type { WarmPoolConfig } from './warm-pool.js';
import type { WritebackBound } from './storage/btrfs-volume.js';
import { type ObjectStore, objectStoreFromEnv } from './storage/object-store.js';

export interface NodeConfig {
  /** Data directory of this node agent (`SPACE_DATA_DIR`, default /var/lib/space). */
  dataDir: string;
  /** Address the node API listens on (`SPACE_NODE_HOST`, default 127.0.0.1). */
  host: string;
  /** Port of the node API (`SPACE_NODE_PORT`; 7071 standalone, a free port when embedded in `space up`). */
  port: number;
  /** Token the control plane presents (`SPACE_NODE_TOKEN`, else generated into `<data>/node/token`). */
  token: string;
  nodeId: string;
  /** What the node offers to placement (`SPACE_NODE_MEMORY_MB`, `SPACE_NODE_CPUS`; the host's by default). */
  capacity: NodeCapacity;
  /** Size of the sparse btrfs image created on first start (`SPACE_VOLUME_SIZE_GB`, default 40). */
  volumeSizeGb: number;
  /** Dirty data and commit interval of that filesystem (`SPACE_VOLUME_DIRTY_MB`, default 16; `SPACE_VOLUME_COMMIT_SEC`, default 1). */
  writeback: WritebackBound;
  /** Host memory full checkpoints' images may take at once while their sandboxes are paused (`SPACE_CHECKPOINT_STAGING_MB`, default 2048; 0: written to the volume). */
  imageStagingMb: number;
  /** The built agent and helpers that every sandbox mounts (packages/agent/dist). */
  sandboxRuntimeBuildDir: string;
  runtime: GvisorOptions;
  /** Warm pool settings; `templates: null` pools every template prepared at start. */
  pool: Omit<WarmPoolConfig, 'templates'> & { templates: string[] | null };
  gateway: GatewayConfig;
  /** Where checkpoints are stored for other nodes (`SPACE_OBJECT_STORE`); null: they stay on this node only. */
  objectStore: ObjectStore | null;
}

export interface GatewayConfig {
  /** The cluster's gateway CA (`SPACE_GATEWAY_CA_DIR`, default `<data>/gateway-ca`): the same on every node. */
  caDir: string;
  /** Test only (`SPACE_GATEWAY_TEST_HOSTS=name=ip:port,...`): host names sent to a fixed address. */
  testHosts: Map<string, { address: string; port: number }>;
  /** Test only (`SPACE_GATEWAY_TEST_CA_FILE`): a CA the gateway trusts for those hosts. */
  testCaFile: string | null;
  /** Whether sandboxes may reach IPv6 addresses (`SPACE_EGRESS_IPV6=1`; off by default). */
  ipv6Egress: boolean;
  /** The longest the gateway keeps a DNS answer, whatever its TTL (`SPACE_GATEWAY_DNS_MAX_TTL`, seconds, default 300; 0: no cache). */
  dnsMaxTtlSeconds: number;
}

/** Parses `name=ip:port,...`; the message names the variable and the entry at fault. */
export function parseTestHosts(raw: string | undefined): Map<string, { address: string; port: number }> {
  const hosts = new Map<string, { address: string; port: number }>();
  for (const entry of (raw ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const match = /^([a-z0-9.-]+)=(\d+\.\d+\.\d+\.\d+):(\d+)$/i.exec(entry);
    if (!match) throw new Error(`SPACE_GATEWAY_TEST_HOSTS entries look like name=127.0.0.1:8443, got ${JSON.stringify(entry)}`);
    hosts.set(match[1]!.toLowerCase(), { address: match[2]!, port: Number(match[3]) });
  }
  return hosts;
}

/** A non-negative integer setting, or a message that names the variable. */
function integerSetting(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number >= 0, got ${JSON.stringify(raw)}`);
  return value;
}

function choiceSetting<T extends string>(env: NodeJS.ProcessEnv, name: string, choices: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!choices.includes(raw as T)) throw new Error(`${name} must be one of ${choices.join(', ')}, got ${JSON.stringify(raw)}`);
  return raw as T;
}

/** `SPACE_NODE_ID` when set (a cluster's operator names its nodes), checked. */
function nodeIdSetting(env: NodeJS.ProcessEnv): string | null {
  const raw = env.SPACE_NODE_ID;
  if (!raw) return null;
  const parsed = NodeIdSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`SPACE_NODE_ID: ${parsed.error.issues[0]?.message}, got ${JSON.stringify(raw)}`);
  return raw;
}

/** Reads a value kept in a file, creating it with `make()` the first time. */
export async function persistentValue(file: string, make: () => string): Promise<string> {
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const value = make();
  await writeFile(file, `${value}\n`, { mode: 0o600 });
  return value;
}

export async function resolveNodeConfig(env: NodeJS.ProcessEnv, overrides: Partial<NodeConfig> & { sandboxRuntimeBuildDir: string }): Promise<NodeConfig> {
  const dataDir = path.resolve(overrides.dataDir ?? env.SPACE_DATA_DIR ?? '/var/lib/space');
  const nodeDir = path.join(dataDir, 'node');
  return {
    dataDir,
    host: overrides.host ?? env.SPACE_NODE_HOST ?? '127.0.0.1',
    port: overrides.port ?? Number(env.SPACE_NODE_PORT ?? 7071),
    token: overrides.token ?? env.SPACE_NODE_TOKEN ?? (await persistentValue(path.join(nodeDir, 'token'), () => randomBytes(32).toString('hex'))),
    nodeId: overrides.nodeId ?? nodeIdSetting(env) ?? (await persistentValue(path.join(nodeDir, 'node-id'), () => newId('node', 10))),
    capacity: overrides.capacity ?? {
      memoryMb: integerSetting(env, 'SPACE_NODE_MEMORY_MB', 0) || Math.floor(totalmem() / 2 ** 20),
      cpus: integerSetting(env, 'SPACE_NODE_CPUS', 0) || availableParallelism(),
    },
    volumeSizeGb: overrides.volumeSizeGb ?? Number(env.SPACE_VOLUME_SIZE_GB ?? 40),
    writeback: overrides.writeback ?? {
      dirtyMb: integerSetting(env, 'SPACE_VOLUME_DIRTY_MB', 16),
      commitSec: Math.max(1, integerSetting(env, 'SPACE_VOLUME_COMMIT_SEC', 1)),
    },
    imageStagingMb: overrides.imageStagingMb ?? integerSetting(env, 'SPACE_CHECKPOINT_STAGING_MB', 2048),
    sandboxRuntimeBuildDir: overrides.sandboxRuntimeBuildDir,
    runtime: overrides.runtime ?? {
      platform: choiceSetting(env, 'SPACE_RUNSC_PLATFORM', ['ptrace', 'systrap'] as const, 'ptrace'),
      checkpointCompression: choiceSetting(env, 'SPACE_CHECKPOINT_COMPRESSION', ['flate-best-speed', 'none'] as const, 'none'),
    },
    pool: overrides.pool ?? {
      size: integerSetting(env, 'SPACE_POOL_SIZE', 2),
      templates: env.SPACE_POOL_TEMPLATES
        ? env.SPACE_POOL_TEMPLATES.split(',')
            .map((t) => t.trim())
            .filter(Boolean)
        : null,
      maxMemoryMb: integerSetting(env, 'SPACE_POOL_MAX_MEMORY_MB', 2048),
      sandboxMemoryMb: integerSetting(env, 'SPACE_POOL_SANDBOX_MEMORY_MB', 24),
      refillDelayMs: integerSetting(env, 'SPACE_POOL_REFILL_DELAY_MS', 500),
      templateImages: integerSetting(env, 'SPACE_TEMPLATE_IMAGES', 0) > 0,
    },
    objectStore: overrides.objectStore !== undefined ? overrides.objectStore : objectStoreFromEnv(env),
    gateway: overrides.gateway ?? {
      caDir: path.resolve(env.SPACE_GATEWAY_CA_DIR ?? path.join(dataDir, 'gateway-ca')),
      testHosts: parseTestHosts(env.SPACE_GATEWAY_TEST_HOSTS),
      testCaFile: env.SPACE_GATEWAY_TEST_CA_FILE ? path.resolve(env.SPACE_GATEWAY_TEST_CA_FILE) : null,
      ipv6Egress: choiceSetting(env, 'SPACE_EGRESS_IPV6', ['0', '1'] as const, '0') === '1',
      dnsMaxTtlSeconds: integerSetting(env, 'SPACE_GATEWAY_DNS_MAX_TTL', 300),
    },
  };
}
