import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import {
  ClusterCa,
  ControlPlane,
  ControlPlaneCertificate,
  plainNodeApiRefusal,
  SecretCipher,
  openStoreFor,
  readControlPlaneSettings,
  secretsKeyFileOf,
} from '@space/control-plane';
import { consoleLogger } from '@space/node';
import { resolveAdminKey } from '../admin-key.js';

/**
 * `space control-plane`: the public API alone, using a node agent at SPACE_NODE_URL with
 * SPACE_NODE_TOKEN, and any node that registers itself (`space node` with SPACE_CONTROL_PLANE_URL).
 */
export async function controlPlaneOnly(): Promise<void> {
  const settings = readControlPlaneSettings(process.env);
  const log = consoleLogger('control-plane', settings.quiet);
  const { nodeUrl, nodeToken } = settings;
  if (Boolean(nodeUrl) !== Boolean(nodeToken))
    throw new Error('set both SPACE_NODE_URL and SPACE_NODE_TOKEN (the node agent started with "space node"), or neither');
  if (!nodeUrl && !settings.databaseUrl)
    throw new Error('set SPACE_NODE_URL and SPACE_NODE_TOKEN, or SPACE_DATABASE_URL for a cluster whose nodes register themselves');
  const plainConfigured = nodeUrl ? plainNodeApiRefusal(nodeUrl, settings.allowPlainNodeApi) : null;
  if (plainConfigured) throw new Error(`SPACE_NODE_URL: ${plainConfigured}`);
  const dataDir = path.resolve(settings.dataDir);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const store = await openStoreFor(settings, dataDir);
  const adminKey = await resolveAdminKey(dataDir, settings.apiKey, (line) => process.stdout.write(`${line}\n`));
  const node = nodeUrl && nodeToken ? { url: nodeUrl, token: nodeToken } : undefined;
  const secrets = await SecretCipher.load(secretsKeyFileOf(settings));
  const clusterCa = settings.clusterCaDir ? await ClusterCa.open(path.resolve(settings.clusterCaDir)) : null;
  // Node APIs of the cluster CA take calls from control planes presenting one of its client certificates.
  const clusterTls = clusterCa ? { ca: clusterCa, certificate: await ControlPlaneCertificate.issue(clusterCa, (m) => log.warn(m)) } : null;
  if (!clusterCa && settings.databaseUrl)
    log.warn(
      'no SPACE_CLUSTER_CA_DIR: nodes that join serve their node API over plain HTTP, taken on loopback only (unless SPACE_ALLOW_PLAIN_NODE_API=1); see deploy.md, "Node agents"',
    );
  if (settings.allowPlainNodeApi)
    log.warn(
      'SPACE_ALLOW_PLAIN_NODE_API=1: node APIs over plain HTTP on network addresses are taken; node tokens and secret values cross the network in the clear',
    );
  const controlPlane = new ControlPlane({ settings, adminKey, store, secrets, node, clusterTls, log: (m) => log.warn(m) });
  await controlPlane.start();
  const stop = async (): Promise<void> => {
    await controlPlane.stop();
    await store.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  // On stdout, as `space up` and `space node` say they are up: SPACE_QUIET does not hide it.
  process.stdout.write(`control plane on http://${settings.host}:${controlPlane.port}, ${nodeUrl ? `node at ${nodeUrl}` : 'nodes register themselves'}\n`);
}
