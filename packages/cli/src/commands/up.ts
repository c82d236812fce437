import { mkdir } from 'node:fs/promises';
import { ControlPlane, SecretCipher, type Store, openStore } from '@space/control-plane';
import { NodeAgent, consoleLogger, resolveNodeConfig } from '@space/node';
import { resolveAdminKey } from '../admin-key.js';
import { controlPlaneTuning, sandboxRuntimeBuildDir, platformConfig } from '../platform-config.js';

/** `space up`: node agent and control plane in one process, talking over the node API on loopback. */
export async function up(): Promise<void> {
  const config = platformConfig(process.env);
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const log = consoleLogger('space', process.env.SPACE_QUIET === '1');
  const nodeConfig = await resolveNodeConfig(process.env, {
    dataDir: config.dataDir,
    host: '127.0.0.1',
    port: Number(process.env.SPACE_NODE_PORT ?? 0),
    sandboxRuntimeBuildDir: sandboxRuntimeBuildDir(),
  });
  const node = new NodeAgent(nodeConfig, consoleLogger('node', process.env.SPACE_QUIET === '1'));
  let store: Store | null = null;
  let controlPlane: ControlPlane | null = null;
  let stopping = false;

  const stop = async (signal: string, exitCode = 0): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: stopping sandboxes and unmounting storage`);
    await controlPlane?.stop().catch((err) => log.error(String(err)));
    // A stop that left something behind is not a clean one: the exit code says so.
    await node.stop().catch((err) => {
      log.error(`node stop: ${String(err)}`);
      exitCode = 1;
    });
    await controlPlane?.nodeStopped().catch((err) => log.error(`store update: ${String(err)}`));
    await store?.close().catch((err) => log.error(`store close: ${String(err)}`));
    log.info(exitCode === 0 ? 'stopped cleanly' : 'stopped');
    process.exit(exitCode);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));

  try {
    store = await openStore(config);
    await node.start({ templates: config.templates, progress: (m) => log.info(m) });
    const adminKey = await resolveAdminKey(config.dataDir, config.apiKey, (line) => process.stdout.write(`${line}\n`));
    const secrets = await SecretCipher.load(config.secretsKeyFile);
    controlPlane = new ControlPlane({
      host: config.host,
      port: config.port,
      adminKey,
      store,
      secrets,
      node: { url: node.url, token: nodeConfig.token },
      ...controlPlaneTuning(config),
      log: (m) => log.warn(m),
    });
    await controlPlane.start();
    process.stdout.write(`SPACE is up: http://${config.host}:${controlPlane.port} (data in ${config.dataDir}). Ctrl-C stops it.\n`);
  } catch (err) {
    log.error(`cannot start: ${(err as Error).message}`);
    await stop('startup failure', 1);
  }
}
