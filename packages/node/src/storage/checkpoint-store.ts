import { readdir } from 'node:fs/promises';
import { ErrorCode, SpaceError } from '@space/protocol';
import type { BtrfsVolume } from './btrfs-volume.js';
import type { Subvolumes } from './subvolumes.js';

/**
 * Filesystem checkpoints: read-only snapshots of a session's volume under `checkpoints/<id>`. They
 * share blocks with the volume and with each other; a volume made from one (restore, fork) is a
 * writable snapshot of it, so nothing is copied.
 */
export class CheckpointStore {
  constructor(
    private readonly volume: BtrfsVolume,
    private readonly subvolumes: Subvolumes,
  ) {}

  path(checkpointId: string): string {
    return this.volume.dir('checkpoints', checkpointId);
  }

  async take(volumePath: string, checkpointId: string): Promise<void> {
    if (!this.subvolumes.exists(volumePath)) throw new SpaceError(ErrorCode.SESSION_NOT_FOUND, 'the session has no volume on this node');
    await this.subvolumes.snapshot(volumePath, this.path(checkpointId), true);
  }

  /** Replaces (or creates) a volume with a writable snapshot of a checkpoint. */
  async materialize(checkpointId: string, volumePath: string): Promise<void> {
    const source = this.path(checkpointId);
    if (!this.subvolumes.exists(source)) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${checkpointId} is not on this node`);
    // The new volume is complete before the old one goes: a failure leaves the session as it was.
    const staging = `${volumePath}.restoring`;
    await this.subvolumes.delete(staging);
    await this.subvolumes.snapshot(source, staging, false);
    await this.subvolumes.delete(volumePath);
    await this.subvolumes.rename(staging, volumePath);
  }

  async list(): Promise<string[]> {
    return (await readdir(this.volume.dir('checkpoints')).catch(() => [] as string[])).filter((name) => name.startsWith('ckp_'));
  }

  async delete(checkpointId: string): Promise<void> {
    await this.subvolumes.delete(this.path(checkpointId));
  }
}
