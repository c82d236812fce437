import { ErrorCode, isSpaceError } from '@space/protocol';
import type { NodeClient } from '../cluster/node-client.js';
import type { CheckpointTaker } from '../checkpoints/checkpoint-taker.js';
import type { LeftVolumeRow, SessionRow, Store } from '../store/store.js';
import type { EgressService } from '../tenants/egress-service.js';
import type { LifecycleQueue } from './lifecycle-queue.js';
import type { MovingVolumes } from './moving-volumes.js';

export interface LeftVolumesDeps {
  store: Store;
  /** Takes the `rescue` checkpoints, on the node that holds the left volume. */
  taker: Pick<CheckpointTaker, 'take'>;
  lifecycle: LifecycleQueue;
  /** Deletes the copies of the tenant's volumes the session took along. */
  volumes: Pick<MovingVolumes, 'dropCopiesOn'>;
  /** Keeps the egress audit a node holds of a session in the store before that node deletes it. */
  audit: Pick<EgressService, 'keepAudit'>;
  log: (message: string) => void;
}

/**
 * The volumes sessions left on lost nodes, from record to deletion: the one owner of that record.
 * A session that moves off a lost node goes on from its newest shipped checkpoint; what it wrote
 * there after that checkpoint is still in its volume on the lost node. It is recorded before the
 * move (a crash after the move must not forget it) and, once that node answers again, kept in a
 * `rescue` checkpoint of the session (shipped like any other), its egress audit kept in the store,
 * and deleted there. Either of two
 * paths gets there first, each in the session's lifecycle turn and on what the store says then:
 * - the session moves back onto that node (`rescueBeforeArrival`, by the mover, which holds the turn);
 * - a maintenance pass finds the node answering (`sweep`).
 * A left volume of a session deleted meanwhile is deleted; one of a session that lives on that node
 * again (its move failed, or it came back) is its volume: the record is dropped, the volume kept.
 */
export class LeftVolumes {
  constructor(private readonly deps: LeftVolumesDeps) {}

  /** Before a session moves off lost `nodeId`, taking the tenant's volumes `namedVolumeIds` along; the caller holds the session's turn. */
  record(sessionId: string, nodeId: string, namedVolumeIds: string[]): Promise<void> {
    return this.deps.store.recordLeftVolume({ sessionId, nodeId, leftAt: new Date().toISOString(), namedVolumeIds });
  }

  /**
   * A session moving (back) onto `to`: the volume it left there is kept in a `rescue` checkpoint
   * before the move replaces it. The caller holds the session's turn.
   */
  async rescueBeforeArrival(row: SessionRow, to: NodeClient): Promise<void> {
    if (!(await this.isLeft(row.id, to.nodeId))) return;
    try {
      const taken = await this.deps.taker.take(row, 'fs', 'rescue', to);
      this.deps.log(`session ${row.id}: what it wrote on node ${to.nodeId} before it moved away is kept in ${taken.id}`);
    } catch (err) {
      // Gone already (rescued and deleted before its record was): nothing left to keep.
      if (!isSpaceError(err) || err.code !== ErrorCode.SESSION_NOT_FOUND) throw err;
    }
    await this.deps.store.deleteLeftVolume(row.id, to.nodeId);
  }

  /**
   * Rescues every left volume on a node that answers (`answering` gives its client, or undefined).
   * A session busy with its own operation is left for the next sweep; a rescue that fails keeps
   * its record, and is tried again.
   */
  async sweep(answering: (nodeId: string) => NodeClient | undefined): Promise<void> {
    for (const left of await this.deps.store.listLeftVolumes()) {
      const node = answering(left.nodeId);
      if (!node) continue;
      try {
        if (!(await this.deps.store.findSession(left.sessionId))) {
          await node.deleteVolume(left.sessionId);
          await this.deps.volumes.dropCopiesOn(node, left.namedVolumeIds);
          await this.deps.store.deleteLeftVolume(left.sessionId, left.nodeId);
          continue;
        }
        await this.deps.lifecycle.run(left.sessionId, 'maintenance', () => this.rescueInTurn(left, node), { waitMs: 0 });
      } catch (err) {
        if (isSpaceError(err) && err.code === ErrorCode.SESSION_BUSY) continue;
        this.deps.log(`the volume session ${left.sessionId} left on node ${left.nodeId} is not rescued yet: ${(err as Error).message}`);
      }
    }
  }

  /** In the session's turn, on what the store says now: a move back onto that node (which rescues it itself) may have just ended. */
  private async rescueInTurn(left: LeftVolumeRow, node: NodeClient): Promise<void> {
    const { sessionId } = left;
    const row = await this.deps.store.findSession(sessionId);
    if (!row || !(await this.isLeft(sessionId, node.nodeId))) return;
    if (row.volumeNodeId !== node.nodeId) {
      // Its copies of the volumes the session took along are in the rescue checkpoint too.
      const taken = await this.deps.taker.take(row, 'fs', 'rescue', node);
      this.deps.log(`session ${row.id}: what it wrote on node ${node.nodeId} after the checkpoint it moved on from is kept in ${taken.id}`);
      await this.deps.audit.keepAudit(sessionId, node);
      await node.deleteVolume(sessionId);
      await this.deps.volumes.dropCopiesOn(node, left.namedVolumeIds);
    }
    await this.deps.store.deleteLeftVolume(sessionId, node.nodeId);
  }

  private async isLeft(sessionId: string, nodeId: string): Promise<boolean> {
    return (await this.deps.store.listLeftVolumes()).some((l) => l.sessionId === sessionId && l.nodeId === nodeId);
  }
}
