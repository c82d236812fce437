import { chmod, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ErrorCode, SpaceError } from '@space/protocol';
import type { BtrfsVolume } from './btrfs-volume.js';
import type { Subvolumes } from './subvolumes.js';
import { readJsonFile } from '../json-file.js';
import { maxImageAddresses } from '../sandbox-record.js';
import { pathExists } from './path-exists.js';

/** What a restore needs besides the image: how to reach and wake the daemon saved in it. */
export const MemoryImageMetaSchema = z
  .object({
    /** The daemon's channel token at the time of the checkpoint (it is in the image's memory too). */
    token: z.string(),
    /** The read-only runtime directory the image's daemon was running from; a different one cannot be restored onto. */
    runtimeDir: z.string(),
    /**
     * The addresses the image's sockets may be bound to: its sandbox's own at the save, then those
     * it inherited. runsc cannot restore a socket bound to an address its link lacks (a connected
     * UDP socket, a DNS lookup in flight: the restore panics), so a restored sandbox holds them all.
     */
    addresses: z
      .array(z.string().ip({ version: 'v4' }))
      .max(maxImageAddresses)
      .default([]),
    sizeBytes: z.number().int().nonnegative(),
  })
  .strict();
export type MemoryImageMeta = z.infer<typeof MemoryImageMetaSchema>;

const metaFile = 'space-meta.json';

/**
 * Checkpoints: read-only snapshots of a session's volume under `checkpoints/<id>`, and for full
 * checkpoints the memory image next to it in `checkpoints/<id>.memory`. Snapshots share blocks with
 * the volume and with each other; a volume made from one (restore, fork) is a writable snapshot of
 * it, so nothing is copied. An image is written under `.partial` and renamed when complete.
 */
export class CheckpointStore {
  constructor(
    private readonly volume: BtrfsVolume,
    private readonly subvolumes: Subvolumes,
  ) {}

  path(checkpointId: string): string {
    return this.volume.dir('checkpoints', checkpointId);
  }

  imageDir(checkpointId: string): string {
    return `${this.path(checkpointId)}.memory`;
  }

  /** The checkpoint's snapshot (the sandbox's root filesystem as it was), or null when it is not on this node. */
  async snapshotRoot(checkpointId: string): Promise<string | null> {
    const root = this.path(checkpointId);
    return (await this.subvolumes.exists(root)) ? root : null;
  }

  /** Where a memory image is written before it is complete. */
  partialImageDir(checkpointId: string): string {
    return `${this.imageDir(checkpointId)}.partial`;
  }

  async take(volumePath: string, checkpointId: string): Promise<void> {
    if (!(await this.subvolumes.exists(volumePath))) throw new SpaceError(ErrorCode.SESSION_NOT_FOUND, 'the session has no volume on this node');
    await this.subvolumes.snapshot(volumePath, this.path(checkpointId), { readOnly: true });
  }

  /** Publishes a complete memory image (written to `partialImageDir`) with what restoring it needs. */
  async commitImage(checkpointId: string, meta: Omit<MemoryImageMeta, 'sizeBytes'>): Promise<MemoryImageMeta> {
    const partial = this.partialImageDir(checkpointId);
    // The image holds everything the sandbox had in memory: readable by root only.
    await chmod(partial, 0o700);
    for (const entry of await readdir(partial)) await chmod(path.join(partial, entry), 0o600);
    const full: MemoryImageMeta = { ...meta, sizeBytes: await directorySize(partial) };
    await writeFile(path.join(partial, metaFile), JSON.stringify(full), { mode: 0o600 });
    await rename(partial, this.imageDir(checkpointId));
    return full;
  }

  /** The memory image of a full checkpoint, or null for an fs checkpoint (or an unreadable image). */
  async image(checkpointId: string): Promise<{ dir: string; meta: MemoryImageMeta } | null> {
    const dir = this.imageDir(checkpointId);
    const meta = await readJsonFile(path.join(dir, metaFile), MemoryImageMetaSchema);
    return meta ? { dir, meta } : null;
  }

  /** Replaces (or creates) a volume with a writable snapshot of a checkpoint. */
  async materialize(checkpointId: string, volumePath: string): Promise<void> {
    const source = this.path(checkpointId);
    if (!(await this.subvolumes.exists(source))) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${checkpointId} is not on this node`);
    await this.subvolumes.replace(source, volumePath);
  }

  /** Where the checkpoint keeps its copy of one of the session's volumes (see `copyVolumes`). */
  volumeCopyPath(checkpointId: string, volumeId: string): string {
    return path.join(`${this.path(checkpointId)}.volumes`, volumeId);
  }

  /** The volumes the checkpoint holds a copy of (read-only subvolumes `volumeCopyPath` names). */
  async volumeCopies(checkpointId: string): Promise<string[]> {
    return (await readdir(`${this.path(checkpointId)}.volumes`).catch(() => [] as string[])).filter((name) => /^vol_[a-z0-9]+$/.test(name)).sort();
  }

  /** Read-only snapshots of the session's read-write volumes, taken with the checkpoint (`volumePaths`: volume id -> its path). */
  async copyVolumes(checkpointId: string, volumePaths: Map<string, string>): Promise<void> {
    for (const [volumeId, volumePath] of volumePaths) {
      if (!(await this.subvolumes.exists(volumePath))) throw new SpaceError(ErrorCode.VOLUME_NOT_FOUND, `volume ${volumeId} is not on this node`);
      await this.subvolumes.snapshot(volumePath, this.volumeCopyPath(checkpointId, volumeId), { readOnly: true });
    }
  }

  /**
   * Whether the volume was written since the checkpoint was taken of it: btrfs bumps a subvolume's
   * generation with each transaction that changes it, and a snapshot records the one it was made
   * in. The caller flushes the sandbox's writes first; pending ones are committed here. A
   * checkpoint that is not on this node counts as changed.
   */
  async changedSince(volumePath: string, checkpointId: string): Promise<boolean> {
    const checkpoint = this.path(checkpointId);
    if (!(await this.subvolumes.exists(checkpoint))) return true;
    await this.subvolumes.sync(volumePath);
    const [current, taken] = await Promise.all([this.subvolumes.generations(volumePath), this.subvolumes.generations(checkpoint)]);
    return current.generation > taken.createdAt;
  }

  /** Every checkpoint on the node with the time its snapshot was made. */
  async list(): Promise<{ id: string; createdAt: string }[]> {
    const names = (await readdir(this.volume.dir('checkpoints')).catch(() => [] as string[])).filter((name) => /^ckp_[a-z0-9]+$/.test(name));
    const found: { id: string; createdAt: string }[] = [];
    for (const id of names) {
      const made = await stat(this.path(id)).catch(() => null);
      // A snapshot's root may carry its source's times: the newest of them errs on the young side.
      if (made) found.push({ id, createdAt: new Date(Math.max(made.birthtimeMs, made.ctimeMs, made.mtimeMs)).toISOString() });
    }
    return found;
  }

  async delete(checkpointId: string): Promise<void> {
    await rm(this.partialImageDir(checkpointId), { recursive: true, force: true });
    await rm(this.imageDir(checkpointId), { recursive: true, force: true });
    await this.subvolumes.deleteDirectoryOf(`${this.path(checkpointId)}.volumes`);
    await this.subvolumes.delete(this.path(checkpointId));
  }

  /**
   * Removes what a crash mid-checkpoint left: partial images, and images and volume copies whose snapshot is missing,
   * once older than `minAgeMs` (a command a crashed node agent started may still be writing one).
   */
  async removeIncomplete(minAgeMs = 0): Promise<number> {
    let removed = 0;
    for (const name of await readdir(this.volume.dir('checkpoints')).catch(() => [] as string[])) {
      const full = this.volume.dir('checkpoints', name);
      const orphanImage = name.endsWith('.memory') && !(await pathExists(full.slice(0, -'.memory'.length)));
      const orphanCopies = name.endsWith('.volumes') && !(await pathExists(full.slice(0, -'.volumes'.length)));
      if (!name.endsWith('.partial') && !orphanImage && !orphanCopies) continue;
      const age = Date.now() - ((await stat(full).catch(() => null))?.mtimeMs ?? Date.now());
      if (age >= minAgeMs) {
        if (orphanCopies) await this.subvolumes.deleteDirectoryOf(full);
        else await rm(full, { recursive: true, force: true });
        removed++;
      }
    }
    return removed;
  }
}

async function directorySize(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isFile()) total += (await stat(path.join(dir, entry.name))).size;
  }
  return total;
}
