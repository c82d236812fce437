import { ClusterHeartbeat, NodeAgent, consoleLogger, resolveNodeConfig } from '@space/node';
import { sandboxRuntimeBuildDir, platformConfig } from '../platform-config.js';

/** `space node`: the node agent alone, serving the node API for a separate control plane. */
export async function nodeOnly(): Promise<void> {
  const config = platformConfig(process.env);
  const log = consoleLogger('node');
  const nodeConfig = await resolveNodeConfig(process.env, { dataDir: config.dataDir, sandboxRuntimeBuildDir: sandboxRuntimeBuildDir() });
  const node = new NodeAgent(nodeConfig, log);
  const cluster = clusterSettings(process.env);
  let heartbeat: ClusterHeartbeat | null = null;
  let stopping = false;
  const stop = async (exitCode = 0): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await heartbeat?.stop();
    await node.stop().catch((err) => log.error(String(err)));
    process.exit(exitCode);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  try {
    await node.start({ templates: config.templates });
    process.stdout.write(`node ${nodeConfig.nodeId} up: ${node.url} (token in ${config.dataDir}/node/token)\n`);
    if (cluster) {
      heartbeat = new ClusterHeartbeat({
        ...cluster,
        beat: (joining) => node.heartbeat(cluster.advertiseUrl, joining),
        stopMoved: (sessionIds) => node.stopMovedSessions(sessionIds),
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
function clusterSettings(env: NodeJS.ProcessEnv): { controlPlanes: string[]; apiKey: string; intervalMs: number; advertiseUrl: string | null } | null {
  const controlPlanes = (env.SPACE_CONTROL_PLANE_URL ?? '')
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  if (controlPlanes.length === 0) return null;
  for (const url of controlPlanes) if (!/^https?:\/\/[^/]+/.test(url)) throw new Error(`SPACE_CONTROL_PLANE_URL: ${JSON.stringify(url)} is not an http(s) URL`);
  const apiKey = env.SPACE_API_KEY;
  if (!apiKey) throw new Error('SPACE_CONTROL_PLANE_URL is set: set SPACE_API_KEY to the admin key too, so the control planes accept this node');
  const intervalMs = Number(env.SPACE_HEARTBEAT_MS ?? 2000);
  if (!Number.isInteger(intervalMs) || intervalMs < 100)
    throw new Error(`SPACE_HEARTBEAT_MS must be a whole number >= 100, got ${JSON.stringify(env.SPACE_HEARTBEAT_MS)}`);
  return { controlPlanes, apiKey, intervalMs, advertiseUrl: env.SPACE_NODE_ADVERTISE_URL || null };
}
