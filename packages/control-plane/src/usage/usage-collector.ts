import { WriteWindow } from '@space/server-kit';
import type { NodeClient } from '../cluster/node-client.js';
import type { Store } from '../store/store.js';
import type { UsageBatchFrom } from '../store/usage-records.js';

/** The tenants' checkpoint storage is integrated this often (by one control plane: the store's clock decides). */
export const checkpointStorageEveryMs = 60_000;

/** How long a collected batch waits to be stored with others: 1,000 nodes close one every 15 s, each a transaction of its own. */
export const usageWriteWindowMs = 250;

/** The most batches one transaction stores. */
const maxBatchesPerWrite = 200;

/**
 * Transactions of usage under way at once, per control plane: they run on the background
 * connections with maintenance's passes, and a write that outlasted its window started another
 * beside it, so usage could hold all four (at 100,000 sessions, passes waited behind 22–55 statements).
 * Under load the batches wait and go in fewer, bigger transactions; the nodes keep them meanwhile.
 */
const usageWritesAtOnce = 1;

export interface UsageCollectorDeps {
  store: Pick<Store, 'applyUsageBatches' | 'integrateCheckpointStorage'>;
  log: (message: string) => void;
  now: () => number;
  /** Default `usageWriteWindowMs`. */
  writeWindowMs?: number;
}

/**
 * Brings what nodes measured into the store: a node's heartbeat says when it holds batches, and the
 * control plane that takes the beat collects them from that node (`NodeHeartbeats`), stores each
 * batch once (with the other nodes' collected within `usageWriteWindowMs`, in one transaction, one
 * such transaction at a time: `usageWritesAtOnce`) and then acknowledges it, so the node forgets it.
 * A control plane that dies between the two leaves the batch on the node, which goes on saying so
 * in its heartbeats; the next one to collect stores nothing twice (the store applies each ledger's
 * seq once). A node the control planes cannot reach keeps its batches until one can.
 */
export class UsageCollector {
  /** Nodes whose collection failed, logged once until it works again. */
  private readonly failing = new Set<string>();
  private readonly writes: WriteWindow<UsageBatchFrom, boolean>;

  constructor(private readonly deps: UsageCollectorDeps) {
    this.writes = new WriteWindow(
      (items) => deps.store.applyUsageBatches(items),
      deps.writeWindowMs ?? usageWriteWindowMs,
      maxBatchesPerWrite,
      usageWritesAtOnce,
    );
  }

  /** The node's batches, stored and then acknowledged; a failure is logged (once until it works again), the node keeps them. */
  async collectFrom(node: NodeClient): Promise<void> {
    try {
      const batches = await node.usageBatches();
      await Promise.all(batches.map((batch) => this.writes.add({ nodeId: node.nodeId, batch })));
      const last = batches.at(-1);
      if (last) await node.ackUsage({ ledger: last.ledger, through: last.seq });
      if (this.failing.delete(node.nodeId)) this.deps.log(`usage of node ${node.nodeId} is collected again`);
    } catch (err) {
      if (!this.failing.has(node.nodeId)) this.deps.log(`usage of node ${node.nodeId} not collected (it keeps it): ${(err as Error).message}`);
      this.failing.add(node.nodeId);
    }
  }

  /** The tenants' checkpoint storage since it was last integrated, when its minute came (any control plane; the store counts it once). */
  async meterCheckpointStorage(): Promise<void> {
    await this.deps.store
      .integrateCheckpointStorage(this.deps.now(), checkpointStorageEveryMs)
      .catch((err: Error) => this.deps.log(`checkpoint storage not metered this pass: ${err.message}`));
  }
}
