import path from 'node:path';
import type { NodeClient } from '@space/control-plane';
import { ErrorCode, type SandboxInfo, SpaceError } from '@space/protocol';
import { signalAndWait } from '@space/server-kit';
import { startPlatform } from '../platform.js';
import type { Random } from './random.js';
import { NodePartition } from './node-partition.js';
import { nodeClientOf, smallCluster } from './small-cluster.js';

/** How long a platform restarted after a SIGKILL may take to serve again (adopting its sandboxes: seconds when healthy). */
const restartTimeoutMs = 120_000;

/** How long a node fenced at the end of a run (a heartbeat missed under load) is given to hear a control plane again. */
const fenceLiftWaitMs = 30_000;

/**
 * A node's sandboxes, once it is not fenced: a fenced node refuses calls (NODE_UNAVAILABLE) and
 * its sandboxes are paused, and what counts is which of them act once it is heard again, when the
 * fence lifts and those whose session moved away were stopped.
 */
async function sandboxesOnceUnfenced(node: NodeClient): Promise<SandboxInfo[]> {
  for (const deadline = Date.now() + fenceLiftWaitMs; ; ) {
    try {
      return await node.listSandboxes();
    } catch (err) {
      if (!(err instanceof SpaceError && err.code === ErrorCode.NODE_UNAVAILABLE) || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/** What a chaos run faults: one `space up`, or a cluster of control planes and nodes. */
export interface ChaosTarget {
  /** The API's URLs now (calls go to each in turn, as the SDK given several would). */
  apiUrls(): string[];
  /** The data directory of the node `nodeId` (where its sandboxes run and its checkpoints are). */
  nodeDataDir(nodeId: string): string;
  /** Every node's data directory. */
  nodeDataDirs(): string[];
  /** The faults besides sandbox kills, by name: each SIGKILLs a member and brings it back (as a supervisor would), or cuts one off and heals it. */
  faults: Record<string, (rng: Random) => Promise<string>>;
  /** The nodes each session has a running sandbox on now: more than one is two acting copies. */
  actingCopies(): Promise<Map<string, string[]>>;
  /** Stops everything (deleting what the target made for itself). */
  stop(): Promise<void>;
}

export interface TargetOptions {
  dataDir: string;
  adminKey: string;
  env: Record<string, string>;
  /** Gets each platform process's output (whole, or line by line for a cluster's members). */
  platformLog?: (text: string) => void;
}

/** One `space up` (node agent and control plane in one process) on `dataDir`; its fault is a SIGKILL of the whole, then a restart. */
export async function platformTarget(options: TargetOptions): Promise<ChaosTarget> {
  const { dataDir, adminKey, env } = options;
  let platform = await startPlatform({ dataDir, adminKey, env });
  return {
    apiUrls: () => [platform.url],
    nodeDataDir: () => dataDir,
    nodeDataDirs: () => [dataDir],
    faults: {
      platform: async () => {
        await signalAndWait(platform.process, 'SIGKILL');
        options.platformLog?.(platform.output());
        // Its templates are built: a restart that does not serve within this is a hang, not a build.
        platform = await startPlatform({ dataDir, adminKey, env, readyTimeoutMs: restartTimeoutMs });
        return 'platform SIGKILLed and restarted';
      },
    },
    // One node: a session's sandbox is on it or nowhere.
    actingCopies: async () => new Map(),
    stop: async () => {
      await platform.stop();
      options.platformLog?.(platform.output());
    },
  };
}

/**
 * The small cluster (PostgreSQL, two control planes, three nodes, loopback S3) in a data directory
 * of its own, removed when it stops. Its faults: a node agent SIGKILLed and started again after
 * 1–8 s (past 3 s it is marked lost, and its sessions move at their next call), a control plane
 * SIGKILLed and started again on its port, and a node cut off from every control plane by iptables
 * for 3–8 s (it fences itself after 2 s, is lost after 3 s, its sessions move) and then healed.
 */
export async function clusterTarget(options: TargetOptions): Promise<ChaosTarget> {
  const output = options.platformLog ? (member: string, line: string) => options.platformLog!(`${member}: ${line}\n`) : undefined;
  const cluster = await smallCluster({
    dataDir: `${options.dataDir}-chaos-cluster`,
    adminKey: options.adminKey,
    env: { ...options.env, ...(output ? { SPACE_QUIET: '0' } : {}) },
    output,
  });
  try {
    await cluster.start();
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  /**
   * Each node's API URL, as the control planes have it: asked of each in turn until one answers, since
   * a control plane may be down for its own fault just then (one asked alone failed the run once).
   */
  const nodeUrls = async (): Promise<Record<string, string>> => {
    const deadline = Date.now() + 30_000;
    for (let attempt = 0; ; attempt++) {
      const url = cluster.controlPlaneUrls[attempt % cluster.controlPlaneUrls.length];
      const res = await fetch(`${url}/v1/nodes`, { headers: { authorization: `Bearer ${options.adminKey}` } }).catch(() => null);
      const body = res?.ok ? ((await res.json()) as { nodes?: { id: string; url: string }[] }) : null;
      if (body?.nodes) return Object.fromEntries(body.nodes.map((n) => [n.id, n.url]));
      if (Date.now() > deadline) throw new Error(`no control plane listed the nodes within 30 s (last: ${res?.status ?? 'no answer'})`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  };
  return {
    apiUrls: () => cluster.controlPlaneUrls,
    nodeDataDir: (nodeId) => path.join(cluster.root, nodeId),
    nodeDataDirs: () => cluster.nodeNames.map((name) => path.join(cluster.root, name)),
    faults: {
      node: async (rng) => {
        const name = rng.pick(cluster.nodeNames);
        const downMs = rng.int(1000, 8000);
        await signalAndWait(cluster.member(name)!.process, 'SIGKILL');
        await new Promise((resolve) => setTimeout(resolve, downMs));
        await cluster.startNode(name);
        return `node agent ${name} SIGKILLed, started again after ${downMs} ms`;
      },
      partition: async (rng) => {
        const name = rng.pick(cluster.nodeNames);
        const cutMs = rng.int(3000, 8000);
        const nodePort = Number(new URL((await nodeUrls())[name]!).port);
        const partition = new NodePartition(cluster.root);
        try {
          // Inside: a cut that fails halfway (its mount made, a rule not) is undone too.
          partition.cut({
            nodePid: cluster.member(name)!.process.pid!,
            nodePort,
            controlPlanePorts: cluster.controlPlaneUrls.map((u) => Number(new URL(u).port)),
          });
          await new Promise((resolve) => setTimeout(resolve, cutMs));
        } finally {
          partition.heal();
        }
        return `node ${name} cut off from every control plane for ${cutMs} ms (iptables), then healed`;
      },
      controlPlane: async (rng) => {
        const index = rng.int(0, cluster.controlPlaneNames.length - 1);
        await signalAndWait(cluster.member(cluster.controlPlaneNames[index]!)!.process, 'SIGKILL');
        await cluster.startControlPlane(index);
        return `${cluster.controlPlaneNames[index]} SIGKILLed and started again`;
      },
    },
    actingCopies: async () => {
      const copies = new Map<string, string[]>();
      for (const [name, url] of Object.entries(await nodeUrls())) {
        const node = await nodeClientOf(cluster, name, url);
        try {
          for (const sandbox of await sandboxesOnceUnfenced(node))
            if (sandbox.running) copies.set(sandbox.sessionId, [...(copies.get(sandbox.sessionId) ?? []), name]);
        } finally {
          node.close();
        }
      }
      return copies;
    },
    stop: () => cluster.stop(),
  };
}
