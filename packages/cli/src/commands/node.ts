import { NodeAgent, consoleLogger, resolveNodeConfig } from '@space/node';
import { sandboxRuntimeBuildDir, platformConfig } from '../platform-config.js';

/** `space node`: the node agent alone, serving the node API for a separate control plane. */
export async function nodeOnly(): Promise<void> {
  const config = platformConfig(process.env);
  const log = consoleLogger('node');
  const nodeConfig = await resolveNodeConfig(process.env, { dataDir: config.dataDir, sandboxRuntimeBuildDir: sandboxRuntimeBuildDir() });
  const node = new NodeAgent(nodeConfig, log);
  let stopping = false;
  const stop = async (exitCode = 0): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await node.stop().catch((err) => log.error(String(err)));
    process.exit(exitCode);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  try {
    await node.start({ templates: config.templates });
    process.stdout.write(`node ${nodeConfig.nodeId} up: ${node.url} (token in ${config.dataDir}/node/token)\n`);
  } catch (err) {
    log.error(`cannot start: ${(err as Error).message}`);
    await stop(1);
  }
}
