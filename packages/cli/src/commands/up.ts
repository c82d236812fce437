import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import { ControlPlane, SecretCipher, type Store, controlPlaneSettings, openStoreFor, secretsKeyFileOf } from '@space/control-plane';
import { NodeAgent, consoleLogger, nodeSettings, resolveNodeConfig } from '@space/node';
import { readSettings, sharedSettings } from '@space/server-kit';
import { resolveAdminKey } from '../admin-key.js';
import { sandboxRuntimeBuildDir } from '../sandbox-runtime.js';

/** `space up`: node agent and control plane in one process, talking over the node API on loopback. */
export async function up(): Promise<void> {
  // Both halves' settings, read before anything starts: every bad one stops it here, named.
  const settings = readSettings({ ...sharedSettings, ...controlPlaneSettings, ...nodeSettings }, process.env);
  const dataDir = path.resolve(settings.dataDir);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const log = consoleLogger('space', settings.quiet);
  const nodeConfig = await resolveNodeConfig(
    settings,
    {
      dataDir,
      host: '127.0.0.1',
      // The embedded node API takes a free loopback port unless one is asked for.
      port: process.env[nodeSettings.nodePort.name] ? settings.nodePort : 0,
      sandboxRuntimeBuildDir: sandboxRuntimeBuildDir(),
    },
    process.env,
  );
  const node = new NodeAgent(nodeConfig, consoleLogger('node', settings.quiet));
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
    store = await openStoreFor(settings, dataDir);
    await node.start({ templates: settings.templates, progress: (m) => log.info(m) });
    const adminKey = await resolveAdminKey(dataDir, settings.apiKey, (line) => process.stdout.write(`${line}\n`));
    const secrets = await SecretCipher.load(secretsKeyFileOf(settings));
    controlPlane = new ControlPlane({
      settings,
      adminKey,
      store,
      secrets,
      node: { url: node.url, token: nodeConfig.token },
      log: (m) => log.warn(m),
    });
    await controlPlane.start();
    process.stdout.write(`SPACE is up: http://${settings.host}:${controlPlane.port} (data in ${dataDir}). Ctrl-C stops it.\n`);
  } catch (err) {
    log.error(`cannot start: ${(err as Error).message}`);
    await stop('startup failure', 1);
  }
}
