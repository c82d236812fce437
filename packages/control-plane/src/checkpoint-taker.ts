import { newId, type CheckpointKind } from '@space/protocol';
import type { Metrics } from './metrics.js';
import type { NodeDirectory } from './node-directory.js';
import type { CheckpointRow, SessionRow, Store } from './store/store.js';

/** Takes one checkpoint of a session on its node and records it: the step both sessions and checkpoints need. */
export class CheckpointTaker {
  constructor(
    private readonly store: Store,
    private readonly nodes: NodeDirectory,
    private readonly metrics: Metrics,
  ) {}

  async take(session: SessionRow, kind: CheckpointKind, trigger: CheckpointRow['trigger']): Promise<CheckpointRow> {
    const id = newId('ckp');
    const node = await this.nodes.forVolume(session);
    const taken = await node.checkpoint(session.id, id, kind);
    const row: CheckpointRow = {
      id,
      sessionId: session.id,
      tenantId: session.tenantId,
      kind: taken.kind,
      trigger,
      nodeId: node.nodeId,
      createdAt: taken.createdAt,
      sizeBytes: taken.sizeBytes,
      pauseMs: taken.pauseMs,
    };
    await this.store.insertCheckpoint(row);
    this.metrics.inc('checkpoints', { kind, trigger });
    return row;
  }
}
