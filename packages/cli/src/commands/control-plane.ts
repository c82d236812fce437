import { mkdir } from 'node:fs/promises';
import { ControlPlane, SecretCipher, openStore } from '@space/control-plane';
import { consoleLogger } from '@space/node';
import { resolveAdminKey } from '../admin-key.js';
import { controlPlaneTuning, platformConfig } from '../platform-config.js';

/**
 * `space control-plane`: the public API alone, using a node agent at SPACE_NODE_URL with
 * SPACE_NODE_TOKEN, and any node that registers itself (`space node` with SPACE_CONTROL_PLANE_URL).
 */
export async function controlPlaneOnly(): Promise<void> {
  const config = platformConfig(process.env);
  const log = consoleLogger('control-plane');
  const nodeUrl = process.env.SPACE_NODE_URL;
  const nodeToken = process.env.SPACE_NODE_TOKEN;
  if (Boolean(nodeUrl) !== Boolean(nodeToken))
    throw new Error('set both SPACE_NODE_URL and SPACE_NODE_TOKEN (the node agent started with "space node"), or neither');
  if (!nodeUrl && !config.databaseUrl)
    throw new Error('set SPACE_NODE_URL and SPACE_NODE_TOKEN, or SPACE_DATABASE_URL for a cluster whose nodes register themselves');
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const store = await openStore(config);
  const adminKey = await resolveAdminKey(config.dataDir, config.apiKey, (line) => process.stdout.write(`${line}\n`));
  const node = nodeUrl && nodeToken ? { url: nodeUrl, token: nodeToken } : undefined;
  const secrets = await SecretCipher.load(config.secretsKeyFile);
  const controlPlane = new ControlPlane({
    host: config.host,
    port: config.port,
    adminKey,
    store,
    secrets,
    node,
    ...controlPlaneTuning(config),
    log: (m) => log.warn(m),
  });
  await controlPlane.start();
  const stop = async (): Promise<void> => {
    await controlPlane.stop();
    await store.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  log.info(`control plane on http://${config.host}:${controlPlane.port}, ${nodeUrl ? `node at ${nodeUrl}` : 'nodes register themselves'}`);
}
