import { ClusterHeartbeat, NodeAgent, type NodeSettings, consoleLogger, readNodeSettings, resolveNodeConfig } from '@space/node';
import { sandboxRuntimeBuildDir } from '../sandbox-runtime.js';

/** `space node`: the node agent alone, serving the node API for a separate control plane. */
export async function nodeOnly(): Promise<void> {
  const settings = readNodeSettings(process.env);
  const log = consoleLogger('node', settings.quiet);
  const cluster = clusterMembership(settings);
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

/** The cluster this node joins (`SPACE_CONTROL_PLANE_URL`), or null for a node a control plane is configured with. */
function clusterMembership(
  settings: NodeSettings,
): { controlPlanes: string[]; apiKey: string; intervalMs: number; fenceAfterMs: number; advertiseUrl: string | null } | null {
  const controlPlanes = settings.controlPlaneUrls;
  if (controlPlanes.length === 0) return null;
  if (!settings.apiKey) throw new Error('SPACE_CONTROL_PLANE_URL is set: set SPACE_API_KEY to the admin key too, so the control planes accept this node');
  return {
    controlPlanes,
    apiKey: settings.apiKey,
    intervalMs: settings.heartbeatMs,
    fenceAfterMs: settings.nodeFenceAfterSec * 1000,
    advertiseUrl: settings.advertiseUrl ?? null,
  };
}
