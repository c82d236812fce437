import type { NodeHeartbeat, NodeHeartbeatReply } from '@space/protocol';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { EgressService } from '../tenants/egress-service.js';
import type { Store } from '../store/store.js';
import type { UsageCollector } from '../usage/usage-collector.js';

export interface NodeHeartbeatsDeps {
  nodes: Pick<NodeDirectory, 'heartbeat' | 'client'>;
  store: Pick<Store, 'background'>;
  egress: Pick<EgressService, 'repairNode'>;
  usage: Pick<UsageCollector, 'collectFrom'>;
  log: (message: string) => void;
}

/**
 * A node's heartbeat: recorded (`NodeDirectory`), then what it says the node needs is followed up
 * beside the answer, on the background connections: the egress settings its gateway lost are sent
 * again, and the usage batches it holds are collected. The control plane that takes the beat does
 * both, so none asks every node of its share every pass (one that took over 1,000 nodes from a
 * killed replica spent 28 s of each pass on it). Until it is done the node says so again in its
 * next beat, which is the retry. One follow-up of each kind per node at a time.
 */
export class NodeHeartbeats {
  private readonly underWay = new Map<string, Promise<void>>();

  constructor(private readonly deps: NodeHeartbeatsDeps) {}

  async receive(beat: NodeHeartbeat): Promise<NodeHeartbeatReply> {
    const reply = await this.deps.nodes.heartbeat(beat);
    const missing = beat.egressUnconfigured ?? [];
    if (missing.length > 0) this.followUp(`egress settings of node ${beat.id} not sent again`, () => this.deps.egress.repairNode(beat.id, missing));
    if (beat.usageBatches)
      this.followUp(`usage of node ${beat.id} not collected`, async () => this.deps.usage.collectFrom(await this.deps.nodes.client(beat.id)));
    return reply;
  }

  /** Resolves when the follow-ups under way are done (a control plane stopping waits for them). */
  async settle(): Promise<void> {
    await Promise.all(this.underWay.values());
  }

  /** `work` unless the same one is under way; `failure` names it in the log when it fails. */
  private followUp(failure: string, work: () => Promise<void>): void {
    if (this.underWay.has(failure)) return;
    const done = this.deps.store
      .background(work)
      .catch((err: Error) => this.deps.log(`${failure}: ${err.message}`))
      .finally(() => this.underWay.delete(failure));
    this.underWay.set(failure, done);
  }
}
