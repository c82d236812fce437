import { eachAtMost } from '@space/server-kit';
import type { NodeClient } from '../cluster/node-client.js';
import type { Store } from '../store/store.js';

/** The tenants' checkpoint storage is integrated this often (by one control plane: the store's clock decides). */
export const checkpointStorageEveryMs = 60_000;

export interface UsageCollectorDeps {
  store: Pick<Store, 'applyUsageBatch' | 'integrateCheckpointStorage'>;
  log: (message: string) => void;
  now: () => number;
}

/**
 * Brings what nodes measured into the store: each control plane collects from the nodes of its
 * share every maintenance pass (another takes a node over when it dies), stores each batch once
 * and then acknowledges it, so the node forgets it. A control plane that dies between the two
 * leaves the batch on the node; the next one to collect stores nothing twice (the store applies
 * each ledger's seq once). A node the control planes cannot reach keeps its batches until one can.
 */
export class UsageCollector {
  /** Nodes whose collection failed, logged once until it works again. */
  private readonly failing = new Set<string>();

  constructor(private readonly deps: UsageCollectorDeps) {}

  async collect(nodes: NodeClient[], atOnce: number): Promise<void> {
    await eachAtMost(nodes, atOnce, (node) => this.collectFrom(node));
    await this.deps.store
      .integrateCheckpointStorage(this.deps.now(), checkpointStorageEveryMs)
      .catch((err: Error) => this.deps.log(`checkpoint storage not metered this pass: ${err.message}`));
  }

  private async collectFrom(node: NodeClient): Promise<void> {
    try {
      const batches = await node.usageBatches();
      for (const batch of batches) await this.deps.store.applyUsageBatch(node.nodeId, batch);
      const last = batches.at(-1);
      if (last) await node.ackUsage({ ledger: last.ledger, through: last.seq });
      if (this.failing.delete(node.nodeId)) this.deps.log(`usage of node ${node.nodeId} is collected again`);
    } catch (err) {
      if (!this.failing.has(node.nodeId)) this.deps.log(`usage of node ${node.nodeId} not collected (it keeps it): ${(err as Error).message}`);
      this.failing.add(node.nodeId);
    }
  }
}
