import { readdir } from 'node:fs/promises';
import { ErrorCode, SpaceError, type NodeCreateVolumeRequest } from '@space/protocol';
import type { Logger } from '../logger.js';
import type { BtrfsVolume } from './btrfs-volume.js';
import type { CheckpointStore } from './checkpoint-store.js';
import type { Subvolumes } from './subvolumes.js';

const bytesPerGb = 1024 ** 3;

/**
 * Tenants' volumes, `named-volumes/<vol_…>`: each its own btrfs subvolume held to its size by its
 * quota group, bound into the sandboxes of the sessions that mount it; and their snapshots,
 * `volume-snapshots/<vsn_…>`, read-only. Outside every session's volume, so a session's
 * checkpoints, restores and deletes leave them alone (a checkpoint copies them explicitly).
 */
export class NamedVolumes {
  constructor(
    private readonly volume: BtrfsVolume,
    private readonly subvolumes: Subvolumes,
    private readonly checkpoints: CheckpointStore,
    private readonly log: Logger,
  ) {}

  path(volumeId: string): string {
    return this.volume.dir('named-volumes', volumeId);
  }

  private snapshotPath(snapshotId: string): string {
    return this.volume.dir('volume-snapshots', snapshotId);
  }

  /** Refuses (VOLUME_NOT_FOUND) a volume this node does not hold. */
  async check(volumeId: string): Promise<void> {
    if (!(await this.subvolumes.exists(this.path(volumeId)))) throw new SpaceError(ErrorCode.VOLUME_NOT_FOUND, `volume ${volumeId} is not on this node`);
  }

  /** Makes the volume: empty, or a writable copy of a snapshot or of a checkpoint's copy. Made already: only its size is set again (a retry). */
  async create({ volumeId, sizeGb, from }: NodeCreateVolumeRequest): Promise<void> {
    const target = this.path(volumeId);
    if (!(await this.subvolumes.exists(target))) {
      if (!from) await this.subvolumes.create(target);
      else {
        const source = 'snapshotId' in from ? this.snapshotPath(from.snapshotId) : this.checkpoints.volumeCopyPath(from.checkpointId, from.volumeId);
        if (!(await this.subvolumes.exists(source)))
          throw new SpaceError(
            ErrorCode.VOLUME_NOT_FOUND,
            'snapshotId' in from ? `snapshot ${from.snapshotId} is not on this node` : `checkpoint ${from.checkpointId} holds no copy of ${from.volumeId} here`,
          );
        await this.subvolumes.snapshot(source, target, { readOnly: false });
      }
    }
    await this.subvolumes.limit(target, sizeGb * bytesPerGb);
  }

  async delete(volumeId: string): Promise<void> {
    await this.subvolumes.delete(this.path(volumeId));
  }

  /** A read-only snapshot of the volume (the caller has flushed the writes of the sandbox mounting it read-write). */
  async snapshot(volumeId: string, snapshotId: string): Promise<void> {
    await this.check(volumeId);
    try {
      await this.subvolumes.snapshot(this.path(volumeId), this.snapshotPath(snapshotId), { readOnly: true });
    } catch (err) {
      // The volume went between the check and the snapshot (btrfs: "Could not statfs: No such file
      // or directory"): deleted, or replaced by a restore at that moment and back already.
      if (!/No such file or directory/.test((err as Error).message)) throw err;
      if (await this.subvolumes.exists(this.path(volumeId)))
        throw new SpaceError(ErrorCode.VOLUME_BUSY, `volume ${volumeId} was being restored as it was snapshotted; try again`);
      throw new SpaceError(ErrorCode.VOLUME_NOT_FOUND, `volume ${volumeId} was deleted as it was snapshotted`);
    }
  }

  async deleteSnapshot(snapshotId: string): Promise<void> {
    await this.subvolumes.delete(this.snapshotPath(snapshotId));
  }

  /** Puts a checkpoint's copy of `sourceVolumeId` in place of the volume's files, keeping its size. The caller has stopped the sandboxes mounting it. */
  async restore(volumeId: string, checkpointId: string, sourceVolumeId: string): Promise<void> {
    await this.check(volumeId);
    const copy = this.checkpoints.volumeCopyPath(checkpointId, sourceVolumeId);
    if (!(await this.subvolumes.exists(copy)))
      throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${checkpointId} holds no copy of ${sourceVolumeId} on this node`);
    const limitBytes = (await this.subvolumes.usage(this.path(volumeId)))?.limitBytes ?? null;
    await this.subvolumes.replace(copy, this.path(volumeId));
    await this.subvolumes.limit(this.path(volumeId), limitBytes);
  }

  async usage(volumeId: string): Promise<{ bytes: number; limitBytes: number | null } | null> {
    await this.check(volumeId);
    return this.subvolumes.usage(this.path(volumeId));
  }

  /** Finishes or removes a restore a crash interrupted (see `Subvolumes.replace`). */
  async removeLeftovers(): Promise<void> {
    for (const entry of await readdir(this.volume.dir('named-volumes')).catch(() => [] as string[])) {
      if (!entry.endsWith('.restoring')) continue;
      const staging = this.volume.dir('named-volumes', entry);
      const target = staging.slice(0, -'.restoring'.length);
      try {
        if (await this.subvolumes.exists(target)) await this.subvolumes.delete(staging);
        else await this.subvolumes.rename(staging, target);
      } catch (err) {
        this.log.warn(`could not clear named-volumes/${entry}: ${(err as Error).message}`);
      }
    }
  }
}
