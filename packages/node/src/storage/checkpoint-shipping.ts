import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type DataKey, ErrorCode, SpaceError, type ShipBase, type StoredObject } from '@space/protocol';
import { KeyedQueue, inSpan } from '@space/server-kit';
import type { Logger } from '../logger.js';
import type { BtrfsVolume } from './btrfs-volume.js';
import type { CheckpointStore } from './checkpoint-store.js';
import { Digest, type ObjectStore } from './object-store.js';
import { openObject, sealObject } from './object-sealing.js';
import type { Subvolumes } from './subvolumes.js';
import { pathExists } from './path-exists.js';
import { endChild, finished, produce, readOn, toStdin } from './child-pipes.js';

export interface CheckpointShippingDeps {
  volume: BtrfsVolume;
  checkpoints: CheckpointStore;
  subvolumes: Subvolumes;
  /** Null when `SPACE_OBJECT_STORE` is unset: every operation then says so. */
  objects: ObjectStore | null;
  log: Logger;
}

/** How long a receive whose child failed reads its object on, to tell a short object from a refused one. */
const readOnMs = 60_000;

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

/** OBJECT_CORRUPT unless what was read of the object is what was stored. */
function checkReadBack(digest: Digest, object: StoredObject): void {
  const sha256 = digest.sha256();
  if (digest.bytes === object.bytes && sha256 === object.sha256) return;
  throw new SpaceError(
    ErrorCode.OBJECT_CORRUPT,
    `object ${object.key} read back as ${digest.bytes} bytes (sha256 ${sha256.slice(0, 12)}…), not the ${object.bytes} (${object.sha256.slice(0, 12)}…) stored`,
  );
}

/**
 * Checkpoints to and from the object store, so that any node can restore any checkpoint. A
 * session's checkpoints are stored as `btrfs send` differences to a base (a full send of one of its
 * checkpoints, kept read-only under `bases/`), their memory images as tar files. A node restoring a
 * checkpoint receives the base first when it lacks it, then the difference; every byte read is
 * checked against the size and sha256 recorded when it was stored, and nothing of an object that
 * does not match is kept. Every object is sealed with its tenant's data key (`object-sealing.ts`),
 * which the control plane sends with each call and the node keeps no longer.
 */
export class CheckpointShipping {
  /** One receive per base or checkpoint at a time: forks side by side may all need the same ones. */
  private readonly receiving = new KeyedQueue();
  /** The btrfs and tar children under way: a stopping node ends them, or they keep its storage busy and it cannot be unmounted. */
  private readonly children = new Set<ChildProcess>();
  private stopping = false;

  constructor(private readonly deps: CheckpointShippingDeps) {}

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
        ...(await this.send(objects, dataKey, objectKey('bases', baseId, `.${volumeId}.send`), this.baseVolumePath(baseId, volumeId), null)),
        volumeId,
      });
    const object = await this.send(objects, dataKey, objectKey('bases', baseId, '.send'), this.basePath(baseId), null);
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
        this.send(objects, dataKey, objectKey('checkpoints', checkpointId, '.send'), snapshot, this.basePath(base.id)),
      ),
    ];
    for (const volumeId of copies) {
      const copy = this.deps.checkpoints.volumeCopyPath(checkpointId, volumeId);
      stored.push({
        ...(await this.send(objects, dataKey, objectKey('checkpoints', checkpointId, `.${volumeId}.send`), copy, this.baseVolumePath(base.id, volumeId))),
        volumeId,
      });
    }
    const image = this.deps.checkpoints.imageDir(checkpointId);
    if (await pathExists(image)) {
      const tar = this.spawnOwn('tar', ['-C', image, '-cf', '-', '.'], ['ignore', 'pipe', 'pipe']);
      stored.push(
        await inSpan('ship memory image', { 'space.checkpoint_id': checkpointId }, () =>
          this.storeOutput(objects, dataKey, objectKey('checkpoints', checkpointId, '.memory.tar'), tar, `tar of ${checkpointId}'s memory image`),
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
      await this.receiveSubvolume(objects, copy, dataKey, target);
    }
    if (image) {
      const partial = this.deps.checkpoints.partialImageDir(checkpointId);
      await rm(partial, { recursive: true, force: true });
      await mkdir(partial, { recursive: true, mode: 0o700 });
      try {
        await this.receive(
          objects,
          image,
          dataKey,
          () => this.spawnOwn('tar', ['-C', partial, '-xf', '-'], ['pipe', 'ignore', 'pipe']),
          `untar of ${checkpointId}'s memory image`,
        );
        await rename(partial, this.deps.checkpoints.imageDir(checkpointId));
      } catch (err) {
        await rm(partial, { recursive: true, force: true });
        throw err;
      }
    }
    try {
      await this.receiveSubvolume(objects, send, dataKey, this.deps.checkpoints.path(checkpointId));
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
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.children].map((child) => endChild(child)));
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

  /**
   * A child of the node's own, in a process group of its own: the terminal's Ctrl-C reaches the
   * node, which decides what to stop, and not the `btrfs send` or `tar` it is in the middle of.
   */
  private spawnOwn(command: string, args: string[], stdio: ['ignore' | 'pipe', 'ignore' | 'pipe', 'pipe']): ChildProcess {
    if (this.stopping) throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, 'the node is stopping');
    const child = spawn(command, args, { stdio, detached: true });
    this.children.add(child);
    const forget = (): void => void this.children.delete(child);
    child.once('exit', forget);
    child.once('error', forget);
    return child;
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
        if (!(await this.holds(target))) await this.receiveSubvolume(objects, copy, dataKey, target);
      }
      if (await this.holds(this.basePath(base.id))) return;
      await this.receiveSubvolume(objects, base.object, dataKey, this.basePath(base.id));
    });
  }

  /** `btrfs send` of a read-only subvolume (as a difference to `parent`) into the object store. */
  private send(objects: ObjectStore, dataKey: DataKey, key: string, subvolume: string, parent: string | null): Promise<StoredObject> {
    const child = this.spawnOwn('btrfs', ['send', '-q', ...(parent ? ['-p', parent] : []), subvolume], ['ignore', 'pipe', 'pipe']);
    return this.storeOutput(objects, dataKey, key, child, `btrfs send of ${path.basename(subvolume)}`);
  }

  /** Stores a child's output as `key`, sealed; if either fails, the child is ended and nothing of the object kept. */
  private async storeOutput(objects: ObjectStore, dataKey: DataKey, key: string, child: ChildProcess, what: string): Promise<StoredObject> {
    const { output, done } = produce(child, what);
    const sealed = sealObject(dataKey, key);
    try {
      const [stored] = await Promise.all([objects.put(key, sealed), pipeline(output, sealed)]);
      await done;
      return { ...stored, dataKeyId: dataKey.id };
    } catch (err) {
      child.kill();
      await done.catch(() => undefined);
      await objects.delete(key).catch(() => undefined);
      throw err;
    }
  }

  /**
   * `btrfs receive` of a stored subvolume as `target` (the stream names it as it was sent: the same
   * name), checked; a failure or a mismatch in size or sha256 deletes it. It cannot be received
   * elsewhere and moved: a read-only subvolume cannot be renamed.
   */
  private async receiveSubvolume(objects: ObjectStore, object: StoredObject, dataKey: DataKey, target: string): Promise<void> {
    await mkdir(path.dirname(target), { recursive: true });
    await this.deps.subvolumes.delete(target);
    try {
      await this.receive(
        objects,
        object,
        dataKey,
        () => this.spawnOwn('btrfs', ['receive', '-e', path.dirname(target)], ['pipe', 'ignore', 'pipe']),
        `btrfs receive of ${path.basename(target)}`,
      );
    } catch (err) {
      await this.deps.subvolumes.delete(target).catch(() => undefined);
      throw err;
    }
  }

  /** Whether a complete (read-only) copy of the subvolume is here. */
  private async holds(subvolume: string): Promise<boolean> {
    return (await pathExists(subvolume)) && (await this.deps.subvolumes.isReadOnly(subvolume));
  }

  /**
   * Streams an object, opened with `dataKey`, into the process `start` spawns (the object is
   * fetched first: a missing one starts nothing) and checks it read back as stored; on any failure
   * the process is ended.
   */
  private async receive(objects: ObjectStore, object: StoredObject, dataKey: DataKey, start: () => ChildProcess, what: string): Promise<void> {
    const opened = openObject(object, dataKey);
    const body: Readable = await objects.get(object.key);
    const child = start();
    const done = finished(child, what);
    const digest = new Digest();
    const read = pipeline(body, digest, opened, toStdin(child));
    try {
      await Promise.all([read, done]);
    } catch (err) {
      child.kill();
      await done.catch(() => undefined);
      // A child that refused its stream may have been fed a short or changed object (a store that
      // served less than it stored): the rest is read on, to the end, to say which of the two failed
      // (for a minute at most: a store that stalls then leaves the child's error standing).
      const outcome = await readOn(read, readOnMs);
      // Read to its end (opened or not): a size or sha256 that differs says the store changed it.
      if (outcome === 'ended' || digest.complete) checkReadBack(digest, object);
      body.destroy();
      if (outcome instanceof SpaceError) throw outcome;
      if (err instanceof SpaceError) throw err;
      const how =
        outcome === 'ended' ? 'read whole' : outcome === 'late' ? `still reading after ${readOnMs / 1000} s` : `the read broke off: ${outcome.message}`;
      throw new Error(`${(err as Error).message} (${digest.bytes} of the ${object.bytes} bytes of ${object.key} read; ${how})`);
    }
    checkReadBack(digest, object);
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
