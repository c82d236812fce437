import { ErrorCode, SpaceError } from '@space/protocol';
import type { NodeClient } from '../cluster/node-client.js';
import type { CheckpointRow, SessionRow, Store } from '../store/store.js';

/**
 * The tenant's volumes a session takes along when it leaves its node (lost or drained). Each
 * read-write volume it alone mounts has a copy in every checkpoint of the session, shipped with it
 * (`CheckpointShipper`): the volume goes on on the session's new node from the copy in the
 * checkpoint the session moves on from, and its copy on the old node is deleted once that node
 * is drained, or found again after its loss (`LeftVolumes`). A volume mounted read-only, or by
 * other sessions as well, stays where it is, and so does the session.
 */
export class MovingVolumes {
  constructor(private readonly store: Store) {}

  /** VOLUME_UNAVAILABLE when a volume keeps the session on its node. */
  async refuseIfPinned(row: SessionRow, why: string): Promise<void> {
    for (const volume of row.volumes) {
      const others = (await this.store.listVolumeMounts(volume.volumeId)).filter((m) => m.sessionId !== row.id);
      const pin = volume.readOnly
        ? 'mounted read-only, it has no copy in the checkpoints'
        : others.length > 0
          ? `also mounted by ${others.map((m) => m.sessionId).join(', ')}`
          : null;
      if (pin)
        throw new SpaceError(
          ErrorCode.VOLUME_UNAVAILABLE,
          `session ${row.id} cannot move (${why}): volume ${volume.name} is ${pin}, and stays on its node with the session`,
        );
    }
  }

  /** The ids of the volumes the session takes along. */
  taken(row: SessionRow): string[] {
    return row.volumes.filter((v) => !v.readOnly).map((v) => v.volumeId);
  }

  /** Why the session cannot move on from `checkpoint` (it lacks a shipped copy of one of them), or null. */
  missingCopies(row: SessionRow, checkpoint: CheckpointRow): string | null {
    const missing = row.volumes.filter((v) => !v.readOnly && !checkpoint.shippedObjects?.some((o) => o.volumeId === v.volumeId));
    return missing.length > 0 ? `no copy of volume(s) ${missing.map((v) => v.name).join(', ')} in the object store` : null;
  }

  /**
   * Makes each volume the session takes along live on `to`, from the checkpoint's copy (fetched
   * there with it), and records it there. A copy `to` held already (the session is moving back onto
   * a node it left) was kept in a rescue checkpoint before (`LeftVolumes.rescueBeforeArrival`).
   */
  async placeOn(row: SessionRow, checkpoint: CheckpointRow, to: NodeClient): Promise<void> {
    for (const volumeId of this.taken(row)) {
      const volume = await this.store.findVolume(volumeId);
      if (!volume) throw new SpaceError(ErrorCode.VOLUME_NOT_FOUND, `volume ${volumeId} of session ${row.id} was deleted`);
      await to.deleteNamedVolume(volumeId);
      await to.createNamedVolume({ volumeId, sizeGb: volume.sizeGb, from: { checkpointId: checkpoint.id, volumeId } });
      await this.store.moveVolume(volumeId, to.nodeId);
    }
  }

  /** Deletes `node`'s copies of the volumes in `volumeIds` that live elsewhere now (or were deleted). */
  async dropCopiesOn(node: NodeClient, volumeIds: string[]): Promise<void> {
    for (const volumeId of volumeIds) {
      const volume = await this.store.findVolume(volumeId);
      if (volume?.nodeId !== node.nodeId) await node.deleteNamedVolume(volumeId);
    }
  }
}
