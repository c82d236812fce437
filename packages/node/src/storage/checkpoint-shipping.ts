import { createHash } from 'node:crypto';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { type DataKey, ErrorCode, SpaceError, type ShipBase, type StoredObject } from '@space/protocol';
import { KeyedQueue, inSpan } from '@space/server-kit';
import type { Logger } from '../logger.js';
import type { BtrfsVolume } from './btrfs-volume.js';
import type { CheckpointStore } from './checkpoint-store.js';
import type { ObjectStore } from './object-store.js';
import type { Subvolumes } from './subvolumes.js';
import { pathExists } from './path-exists.js';
import { SealedTransfer } from './sealed-transfer.js';

export interface CheckpointShippingDeps {
  volume: BtrfsVolume;
  checkpoints: CheckpointStore;
  subvolumes: Subvolumes;
  /** Null when `SPACE_OBJECT_STORE` is unset: every operation then says so. */
  objects: ObjectStore | null;
  log: Logger;
}

/** How many times a fetch is tried: a read of the object store can break off (a reset, a stall) and may simply be repeated. */
const fetchAttempts = 3;

/** Whether a failed fetch is worth another read: not when the object or the store is missing, the node stops, or the object is sealed with another key. */
function worthAnotherRead(err: unknown): boolean {
  return !(err instanceof SpaceError) || (err.code === ErrorCode.OBJECT_CORRUPT && err.details?.sealedWith === undefined);
}

/**
 * The key of an object of checkpoint or base `id`: under a prefix of two hex digits of the id's
 * hash, so a cluster's objects spread over 256 prefixes (S3 scales request rates per prefix).
 * Objects stored before keep their keys: every key is recorded with its object.
 */
export function objectKey(folder: 'checkpoints' | 'bases', id: string, suffix: string): string {
  return `${folder}/${createHash('sha256').update(id).digest('hex').slice(0, 2)}/${id}${suffix}`;
}

/**
 * Checkpoints to and from the object store, so that any node can restore any checkpoint. A
 * session's checkpoints are stored as `btrfs send` differences to a base (a full send of one of its
 * checkpoints, kept read-only under `bases/`), their memory images as tar files. A node restoring a
 * checkpoint receives the base first when it lacks it, then the difference; every byte read is
 * checked against the size and sha256 recorded when it was stored, and nothing of an object that
 * does not match is kept (`SealedTransfer`). Every object is sealed with its tenant's data key
 * (`object-sealing.ts`), which the control plane sends with each call and the node keeps no longer.
 */
export class CheckpointShipping {
  /** One receive per base or checkpoint at a time: forks side by side may all need the same ones. */
  private readonly receiving = new KeyedQueue();
  private readonly transfer: SealedTransfer;

  constructor(private readonly deps: CheckpointShippingDeps) {
    this.transfer = new SealedTransfer(deps.subvolumes);
  }

  /** Makes `baseId` a read-only copy of a checkpoint this node holds, with its volume copies, and stores each whole. */
  async createBase(baseId: string, fromCheckpointId: string, dataKey: DataKey): Promise<ShipBase> {
    const objects = this.objects();
    const source = this.deps.checkpoints.path(fromCheckpointId);
    if (!(await pathExists(source))) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${fromCheckpointId} is not on this node`);
    const copies = await this.deps.checkpoints.volumeCopies(fromCheckpointId);
    const made = [
      { from: source, to: this.basePath(baseId) },
      ...copies.map((volumeId) => ({ from: this.deps.checkpoints.volumeCopyPath(fromCheckpointId, volumeId), to: this.baseVolumePath(baseId, volumeId) })),
    ];
    for (const { from, to } of made) {
      await mkdir(path.dirname(to), { recursive: true });
      if (await this.holds(to)) continue;
      await this.deps.subvolumes.delete(to);
      await this.deps.subvolumes.snapshot(from, to, { readOnly: true });
    }
    const volumes: StoredObject[] = [];
    for (const volumeId of copies)
      volumes.push({
        ...(await this.transfer.sendSubvolume(objects, dataKey, objectKey('bases', baseId, `.${volumeId}.send`), this.baseVolumePath(baseId, volumeId), null)),
        volumeId,
      });
    const object = await this.transfer.sendSubvolume(objects, dataKey, objectKey('bases', baseId, '.send'), this.basePath(baseId), null);
    return { id: baseId, object, volumes };
  }

  /**
   * Stores the checkpoint as its difference to `base` (received first when this node lacks it),
   * each of its volume copies as a difference to the base's copy of that volume, and its memory image.
   */
  async ship(checkpointId: string, base: ShipBase, dataKey: DataKey): Promise<StoredObject[]> {
    const objects = this.objects();
    const snapshot = this.deps.checkpoints.path(checkpointId);
    if (!(await pathExists(snapshot))) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${checkpointId} is not on this node`);
    const copies = await this.deps.checkpoints.volumeCopies(checkpointId);
    const uncovered = copies.filter((volumeId) => !base.volumes?.some((o) => o.volumeId === volumeId));
    if (uncovered.length > 0)
      throw new SpaceError(
        ErrorCode.OBJECT_NOT_FOUND,
        `base ${base.id} holds no copy of volume(s) ${uncovered.join(', ')} of checkpoint ${checkpointId}: its copies need a base that has them`,
      );
    await inSpan('ship base', { 'space.base_id': base.id }, () => this.ensureBase(objects, base, dataKey));
    const stored = [
      await inSpan('btrfs send', { 'space.checkpoint_id': checkpointId }, () =>
        this.transfer.sendSubvolume(objects, dataKey, objectKey('checkpoints', checkpointId, '.send'), snapshot, this.basePath(base.id)),
      ),
    ];
    for (const volumeId of copies) {
      const copy = this.deps.checkpoints.volumeCopyPath(checkpointId, volumeId);
      stored.push({
        ...(await this.transfer.sendSubvolume(
          objects,
          dataKey,
          objectKey('checkpoints', checkpointId, `.${volumeId}.send`),
          copy,
          this.baseVolumePath(base.id, volumeId),
        )),
        volumeId,
      });
    }
    const image = this.deps.checkpoints.imageDir(checkpointId);
    if (await pathExists(image)) {
      stored.push(
        await inSpan('ship memory image', { 'space.checkpoint_id': checkpointId }, () =>
          this.transfer.storeOutput(
            objects,
            dataKey,
            objectKey('checkpoints', checkpointId, '.memory.tar'),
            ['tar', '-C', image, '-cf', '-', '.'],
            `tar of ${checkpointId}'s memory image`,
          ),
        ),
      );
    }
    return stored;
  }

  /** Brings a checkpoint this node lacks from the object store (its base first). Nothing is done for one it holds. */
  fetch(checkpointId: string, base: ShipBase, stored: StoredObject[], dataKey: DataKey): Promise<void> {
    return this.receiving.run(checkpointId, async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.fetchOnce(checkpointId, base, stored, dataKey);
        } catch (err) {
          if (attempt >= fetchAttempts || !worthAnotherRead(err)) throw err;
          this.deps.log.warn(
            `fetch of checkpoint ${checkpointId} failed (attempt ${attempt} of ${fetchAttempts}), reading it again: ${(err as Error).message}`,
          );
        }
      }
    });
  }

  private async fetchOnce(checkpointId: string, base: ShipBase, stored: StoredObject[], dataKey: DataKey): Promise<void> {
    const objects = this.objects();
    if (await this.holds(this.deps.checkpoints.path(checkpointId))) return;
    await this.ensureBase(objects, base, dataKey);
    const send = stored.find((o) => o.key.endsWith('.send') && !o.volumeId);
    if (!send) throw new SpaceError(ErrorCode.OBJECT_NOT_FOUND, `checkpoint ${checkpointId} has no stored filesystem`);
    const image = stored.find((o) => o.key.endsWith('.memory.tar'));
    // The volume copies and the memory image first: the snapshot appearing is what makes the checkpoint count as here.
    for (const copy of stored.filter((o) => o.volumeId)) {
      const target = this.deps.checkpoints.volumeCopyPath(checkpointId, copy.volumeId!);
      if (await this.holds(target)) continue;
      await this.transfer.receiveSubvolume(objects, copy, dataKey, target);
    }
    if (image) {
      const partial = this.deps.checkpoints.partialImageDir(checkpointId);
      await rm(partial, { recursive: true, force: true });
      await mkdir(partial, { recursive: true, mode: 0o700 });
      try {
        await this.transfer.receive(objects, image, dataKey, ['tar', '-C', partial, '-xf', '-'], `untar of ${checkpointId}'s memory image`);
        await rename(partial, this.deps.checkpoints.imageDir(checkpointId));
      } catch (err) {
        await rm(partial, { recursive: true, force: true });
        throw err;
      }
    }
    try {
      await this.transfer.receiveSubvolume(objects, send, dataKey, this.deps.checkpoints.path(checkpointId));
    } catch (err) {
      await rm(this.deps.checkpoints.imageDir(checkpointId), { recursive: true, force: true });
      throw err;
    }
    this.deps.log.info(`checkpoint ${checkpointId} fetched from ${objects.description}`);
  }

  /**
   * Ends every child under way (their shipments and fetches fail, as interrupted ones do; what a
   * receive left is removed at the next start) and waits for them; nothing new starts after.
   */
  stop(): Promise<void> {
    return this.transfer.stop();
  }

  /** Deletes a base's local copy, its volume copies too (its objects go with `deleteObjects`). */
  async deleteBase(baseId: string): Promise<void> {
    await this.deps.subvolumes.deleteDirectoryOf(`${this.basePath(baseId)}.volumes`);
    await this.deps.subvolumes.delete(this.basePath(baseId));
  }

  async deleteObjects(keys: string[]): Promise<void> {
    const objects = this.objects();
    for (const key of keys) await objects.delete(key);
  }

  /**
   * Removes what an interrupted receive left (run at start): a subvolume under `bases/` or
   * `checkpoints/` that is still writable (receive makes it read-only last; snapshots are taken read-only).
   */
  async removePartialReceives(): Promise<number> {
    let removed = 0;
    // One listing for all: a node may hold thousands of checkpoints, and this runs at every start.
    const readOnly = await this.deps.subvolumes.readOnlyUnder(this.deps.volume.dir());
    const remove = async (subvolume: string): Promise<void> => {
      if (readOnly.has(subvolume)) return;
      await this.deps.subvolumes.delete(subvolume);
      removed++;
    };
    for (const dir of [this.basesDir(), this.deps.volume.dir('checkpoints')]) {
      for (const name of await readdir(dir).catch(() => [] as string[])) {
        if (/^(bse|ckp)_[a-z0-9]+$/.test(name)) await remove(path.join(dir, name));
        // A base's or checkpoint's copies of volumes, received one by one.
        if (/^(bse|ckp)_[a-z0-9]+\.volumes$/.test(name))
          for (const volumeId of await readdir(path.join(dir, name)).catch(() => [] as string[]))
            if (/^vol_[a-z0-9]+$/.test(volumeId)) await remove(path.join(dir, name, volumeId));
      }
    }
    return removed;
  }

  private objects(): ObjectStore {
    if (!this.deps.objects) throw new SpaceError(ErrorCode.OBJECT_STORE_UNAVAILABLE, 'this node has no object store (set SPACE_OBJECT_STORE)');
    return this.deps.objects;
  }

  /** Receives what this node lacks of the base: its volume copies, then itself. */
  private ensureBase(objects: ObjectStore, base: ShipBase, dataKey: DataKey): Promise<void> {
    return this.receiving.run(base.id, async () => {
      for (const copy of base.volumes ?? []) {
        const target = this.baseVolumePath(base.id, copy.volumeId!);
        if (!(await this.holds(target))) await this.transfer.receiveSubvolume(objects, copy, dataKey, target);
      }
      if (await this.holds(this.basePath(base.id))) return;
      await this.transfer.receiveSubvolume(objects, base.object, dataKey, this.basePath(base.id));
    });
  }

  /** Whether a complete (read-only) copy of the subvolume is here. */
  private async holds(subvolume: string): Promise<boolean> {
    return (await pathExists(subvolume)) && (await this.deps.subvolumes.isReadOnly(subvolume));
  }

  private basesDir(): string {
    return this.deps.volume.dir('bases');
  }

  private basePath(baseId: string): string {
    return path.join(this.basesDir(), baseId);
  }

  /** The base's copy of a volume, which the checkpoints' copies of it are sent as differences to. */
  private baseVolumePath(baseId: string, volumeId: string): string {
    return path.join(`${this.basePath(baseId)}.volumes`, volumeId);
  }
}
