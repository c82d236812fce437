import path from 'node:path';
import {
  ClusterHeartbeat,
  type Logger,
  NodeAgent,
  NodeCertificateRenewal,
  type NodeConfig,
  type NodeSettings,
  consoleLogger,
  nodeIdentity,
  readNodeSettings,
  resolveNodeConfig,
} from '@space/node';
import { Space } from '@space/sdk';
import { sandboxRuntimeBuildDir } from '../sandbox-runtime.js';

/** `space node`: the node agent alone, serving the node API for a separate control plane. */
export async function nodeOnly(): Promise<void> {
  const settings = readNodeSettings(process.env);
  const log = consoleLogger('node', settings.quiet);
  const resolved = await resolveNodeConfig(settings, { sandboxRuntimeBuildDir: sandboxRuntimeBuildDir() }, process.env);
  // Joined first: a node of a cluster with a CA serves its node API over HTTPS with what it was issued.
  const cluster = await clusterMembership(settings, resolved, log).catch((err: Error) => {
    log.error(`cannot start: ${err.message}`);
    process.exit(1);
  });
  const nodeConfig: NodeConfig = cluster?.tls ? { ...resolved, tls: cluster.tls } : resolved;
  const node = new NodeAgent(nodeConfig, log);
  let heartbeat: ClusterHeartbeat | null = null;
  let renewal: NodeCertificateRenewal | null = null;
  let stopping = false;
  const stop = async (exitCode = 0): Promise<void> => {
    if (stopping) return;
    stopping = true;
    renewal?.stop();
    await heartbeat?.stop();
    // A stop that left something behind (storage still mounted) is not a clean one: the exit code says so.
    await node.stop().catch((err) => {
      log.error(`node stop: ${String(err)}`);
      exitCode = 1;
    });
    process.exit(exitCode);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  try {
    await node.start({ templates: settings.templates });
    process.stdout.write(`node ${nodeConfig.nodeId} up: ${node.url} (token in ${nodeConfig.dataDir}/node/token)\n`);
    if (cluster) {
      heartbeat = new ClusterHeartbeat({
        ...cluster,
        beat: (joining) => node.heartbeat(cluster.advertiseUrl, joining),
        stopMoved: (sessionIds) => node.stopMovedSessions(sessionIds),
        fence: () => node.fenceSelf(),
        liftFence: () => node.liftFence(),
        log,
      });
      const registered = await heartbeat.start();
      process.stdout.write(
        registered
          ? `node ${nodeConfig.nodeId} registered with the control plane\n`
          : `node ${nodeConfig.nodeId}: no control plane answered yet; heartbeats continue every ${cluster.intervalMs} ms\n`,
      );
      if (registered && settings.undrainAtStart) await undrainSelf(nodeConfig.nodeId, cluster, log);
      if (cluster.tls) {
        renewal = new NodeCertificateRenewal({
          dir: path.join(nodeConfig.dataDir, 'node'),
          nodeId: nodeConfig.nodeId,
          hosts: cluster.hosts,
          controlPlanes: cluster.controlPlanes,
          credential: cluster.credential,
          renewBeforeMs: settings.certRenewDays * 24 * 60 * 60_000,
          serve: (tls) => node.serveTls(tls),
          log,
        });
        await renewal.start();
      }
    }
  } catch (err) {
    log.error(`cannot start: ${(err as Error).message}`);
    await stop(1);
  }
}

/** SPACE_NODE_UNDRAIN_AT_START: the node takes sessions again (its pod's preStop hook drained it), asked with its own credential. */
async function undrainSelf(nodeId: string, cluster: ClusterMembership, log: Logger): Promise<void> {
  const client = new Space({ apiUrl: cluster.controlPlanes, apiKey: cluster.credential });
  try {
    const view = await client.nodes.undrain(nodeId);
    log.info(`SPACE_NODE_UNDRAIN_AT_START: node ${nodeId} takes new sessions (${view.status})`);
  } catch (err) {
    log.warn(`SPACE_NODE_UNDRAIN_AT_START: could not undrain node ${nodeId}: ${(err as Error).message}; "space node undrain --self" does it`);
  }
}

interface ClusterMembership {
  controlPlanes: string[];
  credential: string;
  intervalMs: number;
  fenceAfterMs: number;
  advertiseUrl: string | null;
  tls: NodeConfig['tls'] | null;
  /** The names control planes reach the node API by: its certificate's. */
  hosts: string[];
}

/**
 * The cluster this node joins (`SPACE_CONTROL_PLANE_URL`) and what its heartbeats carry: its own
 * credential (issued for `SPACE_NODE_JOIN_TOKEN` at its first start, with its node API's
 * certificate when the cluster has a CA), else the admin key, with a warning. Null for a node a
 * control plane is configured with.
 */
async function clusterMembership(settings: NodeSettings, config: NodeConfig, log: Logger): Promise<ClusterMembership | null> {
  const controlPlanes = settings.controlPlaneUrls;
  if (controlPlanes.length === 0) return null;
  const advertised = settings.advertiseUrl ? new URL(settings.advertiseUrl).hostname.replace(/^\[|\]$/g, '') : null;
  const hosts = [advertised ?? (config.host === '0.0.0.0' ? '127.0.0.1' : config.host)];
  const identity = await nodeIdentity({
    dir: path.join(config.dataDir, 'node'),
    nodeId: config.nodeId,
    hosts,
    controlPlanes,
    joinToken: settings.joinToken ?? null,
    waitMs: 60_000,
    log,
  });
  if (!identity && !settings.apiKey)
    throw new Error(
      'SPACE_CONTROL_PLANE_URL is set: set SPACE_NODE_JOIN_TOKEN to a join token ("space node join-token" on a machine with the admin key), so the control planes accept this node',
    );
  if (!identity)
    log.warn('this node heartbeats with the admin key (SPACE_API_KEY): give it SPACE_NODE_JOIN_TOKEN instead, so the admin key stays on the control planes');
  let advertiseUrl = settings.advertiseUrl ?? null;
  if (identity?.tls && advertiseUrl?.startsWith('http:')) {
    advertiseUrl = advertiseUrl.replace(/^http:/, 'https:');
    log.warn(`the node API is served over HTTPS (the cluster CA issued its certificate): advertised as ${advertiseUrl}, not ${settings.advertiseUrl}`);
  }
  return {
    controlPlanes,
    credential: identity?.credential ?? settings.apiKey!,
    intervalMs: settings.heartbeatMs,
    fenceAfterMs: settings.nodeFenceAfterSec * 1000,
    advertiseUrl,
    tls: identity?.tls ?? null,
    hosts,
  };
}
