import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { LocalCluster } from '@space/cli';
import { ClusterCa, NodeClient } from '@space/control-plane';

/** A port with the next one free too: the control planes listen on consecutive ports. */
async function twoFreePorts(): Promise<number> {
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = createServer()
        .once('error', () => resolve(false))
        .listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
  for (let port = 20_000 + Math.floor(Math.random() * 20_000); ; port += 2) if ((await free(port)) && (await free(port + 1))) return port;
}

/**
 * The cluster the cluster test and `bench/cluster.mjs` run (not started): PostgreSQL, two control
 * planes, three nodes with only `tiny` (each starts in about a second), no warm pool, heartbeats
 * every 500 ms, a node fencing itself after 2 s cut off and lost after 3 s; in a data directory of its own, removed when it stops.
 */
export async function smallCluster(options: {
  dataDir: string;
  adminKey: string;
  /** Settings on top of these (for every member). */
  env?: Record<string, string>;
  output?: (member: string, line: string) => void;
}): Promise<LocalCluster> {
  return new LocalCluster({
    dataDir: options.dataDir,
    removeDataOnStop: true,
    nodes: 3,
    controlPlanes: 2,
    port: await twoFreePorts(),
    adminKey: options.adminKey,
    env: {
      SPACE_TEMPLATES: 'tiny',
      SPACE_POOL_SIZE: '0',
      SPACE_TEMPLATE_IMAGES: '0',
      SPACE_VOLUME_SIZE_GB: '8',
      SPACE_HEARTBEAT_MS: '500',
      SPACE_NODE_LOST_AFTER_SEC: '3',
      SPACE_NODE_FENCE_AFTER_SEC: '2',
      SPACE_QUIET: '1',
      ...options.env,
    },
    output: options.output,
  });
}

/** The node API of a node of `cluster`, as its control planes reach it: its URL, its token, the cluster CA and a control plane's client certificate of it. */
export async function nodeClientOf(cluster: LocalCluster, nodeId: string, url: string): Promise<NodeClient> {
  const token = readFileSync(path.join(cluster.root, nodeId, 'node', 'token'), 'utf8').trim();
  const ca = await ClusterCa.open(cluster.clusterCaDir);
  const identity = await ca.issueControlPlaneCertificate(1);
  return new NodeClient(nodeId, url, token, { ca: ca.certificate, identity: () => identity });
}
