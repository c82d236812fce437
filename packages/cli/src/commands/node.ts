import path from 'node:path';
import { ClusterHeartbeat, type Logger, NodeAgent, type NodeSettings, consoleLogger, nodeCredential, readNodeSettings, resolveNodeConfig } from '@space/node';
import { sandboxRuntimeBuildDir } from '../sandbox-runtime.js';

/** `space node`: the node agent alone, serving the node API for a separate control plane. */
export async function nodeOnly(): Promise<void> {
  const settings = readNodeSettings(process.env);
  const log = consoleLogger('node', settings.quiet);
  const nodeConfig = await resolveNodeConfig(settings, { sandboxRuntimeBuildDir: sandboxRuntimeBuildDir() }, process.env);
  const node = new NodeAgent(nodeConfig, log);
  let heartbeat: ClusterHeartbeat | null = null;
  let stopping = false;
  const stop = async (exitCode = 0): Promise<void> => {
    if (stopping) return;
    stopping = true;
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
    const cluster = await clusterMembership(settings, nodeConfig.nodeId, nodeConfig.dataDir, log);
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
    }
  } catch (err) {
    log.error(`cannot start: ${(err as Error).message}`);
    await stop(1);
  }
}

/**
 * The cluster this node joins (`SPACE_CONTROL_PLANE_URL`) and what its heartbeats carry: its own
 * credential (issued for `SPACE_NODE_JOIN_TOKEN` at its first start), else the admin key, with a
 * warning. Null for a node a control plane is configured with.
 */
async function clusterMembership(
  settings: NodeSettings,
  nodeId: string,
  dataDir: string,
  log: Logger,
): Promise<{ controlPlanes: string[]; credential: string; intervalMs: number; fenceAfterMs: number; advertiseUrl: string | null } | null> {
  const controlPlanes = settings.controlPlaneUrls;
  if (controlPlanes.length === 0) return null;
  const credential = await nodeCredential({
    file: path.join(dataDir, 'node', 'credential'),
    nodeId,
    controlPlanes,
    joinToken: settings.joinToken ?? null,
    waitMs: 60_000,
    log,
  });
  if (!credential && !settings.apiKey)
    throw new Error(
      'SPACE_CONTROL_PLANE_URL is set: set SPACE_NODE_JOIN_TOKEN to a join token ("space node join-token" on a machine with the admin key), so the control planes accept this node',
    );
  if (!credential)
    log.warn('this node heartbeats with the admin key (SPACE_API_KEY): give it SPACE_NODE_JOIN_TOKEN instead, so the admin key stays on the control planes');
  return {
    controlPlanes,
    credential: credential ?? settings.apiKey!,
    intervalMs: settings.heartbeatMs,
    fenceAfterMs: settings.nodeFenceAfterSec * 1000,
    advertiseUrl: settings.advertiseUrl ?? null,
  };
}
