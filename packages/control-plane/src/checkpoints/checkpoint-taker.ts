import { newId, type CheckpointKind } from '@space/protocol';
import type { Metrics } from '../metrics/metrics.js';
import type { NodeClient } from '../cluster/node-client.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { CheckpointShipper } from './checkpoint-shipper.js';
import type { CheckpointRow, NewCheckpointRow, SessionRow, Store } from '../store/store.js';

/** Takes one checkpoint of a session on its node, records it and has it shipped: the step both sessions and checkpoints need. */
export class CheckpointTaker {
  constructor(
    private readonly store: Store,
    private readonly nodes: NodeDirectory,
    private readonly metrics: Metrics,
    private readonly shipper: CheckpointShipper,
  ) {}

  /** `on`: a node that holds another volume of the session than its own (one it left there, see `rescue`). */
  async take(session: SessionRow, kind: CheckpointKind, trigger: CheckpointRow['trigger'], on?: NodeClient): Promise<CheckpointRow> {
    const id = newId('ckp');
    const node = on ?? (await this.nodes.forVolume(session));
    const writable = session.volumes.filter((v) => !v.readOnly);
    const taken = await node.checkpoint(
      session.id,
      id,
      kind,
      writable.map((v) => v.volumeId),
    );
    const recorded: NewCheckpointRow = {
      id,
      sessionId: session.id,
      tenantId: session.tenantId,
      kind: taken.kind,
      trigger,
      nodeId: node.nodeId,
      createdAt: taken.createdAt,
      sizeBytes: taken.sizeBytes,
      pauseMs: taken.pauseMs,
      volumes: session.volumes.map((v) => ({ ...v, copied: !v.readOnly })),
    };
    await this.store.insertCheckpoint(recorded);
    this.metrics.inc('checkpoints', { kind, trigger });
    // A full checkpoint's pause: how long the sandbox stood still for it, summed.
    if (taken.pauseMs !== null) this.metrics.inc('checkpoint_pause_seconds', {}, taken.pauseMs / 1000);
    const row: CheckpointRow = { ...recorded, shippedAt: null, shippedBaseId: null, shippedObjects: null };
    this.shipper.shipSoon(row);
    return row;
  }
}
