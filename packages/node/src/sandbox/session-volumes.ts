import { randomBytes } from 'node:crypto';
import { readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { NodeSessionIdSchema } from '@space/protocol';
import { z } from 'zod';
import { installGatewayTrust } from '../gateway/sandbox-trust.js';
import { errnoOf } from '../host-errors.js';
import { readJsonFile } from '../json-file.js';
import type { Logger } from '../logger.js';
import { installCompatPreload } from '../runtime/sandbox-runtime-dir.js';
import { writeInsideVolume } from '../runtime/volume-paths.js';
import type { BtrfsVolume } from '../storage/btrfs-volume.js';
import { MemoryImageMetaSchema } from '../storage/checkpoint-store.js';
import type { Subvolumes } from '../storage/subvolumes.js';
import type { TemplateStore } from '../templates/template-store.js';
import { unclaimedPrefix } from './live-sandboxes.js';
import { pathExists } from '../storage/path-exists.js';

/** A memory image a sandbox is restored from: a full checkpoint's, or a template's (checkpointId null). */
const MemorySourceSchema = z
  .object({
    checkpointId: z.string().nullable(),
    /** For the log: what the image is. */
    label: z.string(),
    dir: z.string(),
    meta: MemoryImageMetaSchema.omit({ sizeBytes: true }),
    /** The image's memory is another session's (fork) or none's (template): the sandbox gets a new machine id. */
    newSession: z.boolean(),
  })
  .strict();
export type MemorySource = z.infer<typeof MemorySourceSchema>;

/**
 * What a session's next sandbox starts from after a restore or fork from a full checkpoint: its
 * memory image, or (an image this node cannot restore) the checkpoint's files with a note saying why.
 */
const PendingStartSchema = z.union([MemorySourceSchema, z.object({ note: z.string().max(2000) }).strict()]);
export type PendingStart = z.infer<typeof PendingStartSchema>;

/** A new /etc/machine-id value. */
export function newMachineId(): string {
  return randomBytes(16).toString('hex');
}

/**
 * Sessions' volumes, `volumes/<session>`: writable btrfs snapshots of a template (or of a
 * checkpoint, after a restore or fork), and the memory image a session's next sandbox starts from
 * when a restore or fork from a full checkpoint left one pending (kept in a file beside the volume,
 * so it survives a restart of the node agent).
 */
export class SessionVolumes {
  constructor(
    private readonly volume: BtrfsVolume,
    private readonly subvolumes: Subvolumes,
    private readonly templates: TemplateStore,
    /** The cluster's gateway CA certificate, installed in every new volume. */
    private readonly gatewayCaPem: string,
    private readonly log: Logger,
  ) {}

  path(sessionId: string): string {
    return this.volume.dir('volumes', sessionId);
  }

  exists(sessionId: string): Promise<boolean> {
    return this.subvolumes.exists(this.path(sessionId));
  }

  /** What the session's volume holds and may hold (its disk quota); null where quotas are off. */
  diskUsage(sessionId: string): Promise<{ bytes: number; limitBytes: number | null } | null> {
    return this.subvolumes.usage(this.path(sessionId));
  }

  /** The bytes of every session's volume on this node, by session id; null where quotas are off. */
  async bytesBySession(): Promise<Map<string, number> | null> {
    const referenced = await this.subvolumes.referencedUnder(this.volume.dir());
    if (!referenced) return null;
    const bySession = new Map<string, number>();
    for (const [where, bytes] of referenced) {
      // Only a session's own volume, named by an id the node API takes: not a restore's staging copy beside it (`ses_….restoring`).
      const [top, name, ...rest] = where.split('/');
      const sessionId = NodeSessionIdSchema.safeParse(name);
      if (top === 'volumes' && sessionId.success && rest.length === 0) bySession.set(sessionId.data, bytes);
    }
    return bySession;
  }

  /** Refuses (UNKNOWN_TEMPLATE) a template this node cannot make the session's volume from, when it has none yet. */
  async checkTemplate(sessionId: string, template: string): Promise<void> {
    if (!(await this.exists(sessionId))) await this.templates.check(template);
  }

  /** A writable snapshot of the template with an identity of its own (a new /etc/machine-id), trusting the gateway, with space-compat preloaded. */
  async create(template: string, sessionId: string): Promise<void> {
    const rootfs = this.path(sessionId);
    await this.subvolumes.snapshot(await this.templates.ensure(template, (m) => this.log.info(m)), rootfs, { readOnly: false });
    // A tenant's template holds a session's or an image's files: no link in it is followed.
    if (await pathExists(path.join(rootfs, 'etc'))) await writeInsideVolume(rootfs, 'etc/machine-id', `${newMachineId()}\n`, 0o444);
    await installGatewayTrust(rootfs, this.gatewayCaPem);
    await installCompatPreload(rootfs);
  }

  /** The session's volume as a writable snapshot of `source` (a template image's read-only root). */
  async createFrom(source: string, sessionId: string): Promise<void> {
    await this.subvolumes.snapshot(source, this.path(sessionId), { readOnly: false });
  }

  /** A read-only snapshot of the session's volume at `target`. */
  async snapshot(sessionId: string, target: string): Promise<void> {
    await this.subvolumes.snapshot(this.path(sessionId), target, { readOnly: true });
  }

  /**
   * Holds the session's volume to `diskGb` (none: no limit). Applied at every sandbox start, since a
   * restore, fork or pooled claim gives the session a new subvolume.
   */
  async limitDisk(sessionId: string, diskGb: number | undefined): Promise<void> {
    await this.subvolumes.limit(this.path(sessionId), diskGb === undefined ? null : diskGb * 1024 ** 3);
  }

  /**
   * Runs `write`, a small file of the node's in the session's volume (the daemon's token), even
   * when the session filled its disk: a write refused by the quota is made with the limit lifted,
   * and the limit set again right after. Else a full session could never start again.
   */
  async writeBeyondLimit(sessionId: string, diskGb: number | undefined, write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
      return;
    } catch (err) {
      if (diskGb === undefined || errnoOf(err) !== 'EDQUOT') throw err;
    }
    await this.subvolumes.limit(this.path(sessionId), null);
    try {
      await write();
    } finally {
      await this.limitDisk(sessionId, diskGb);
    }
  }

  /** Gives a volume to another session (a pooled sandbox's, claimed): an atomic rename. */
  async rename(fromSession: string, toSession: string): Promise<void> {
    await this.subvolumes.rename(this.path(fromSession), this.path(toSession));
  }

  /** Deletes the session's volume and any memory image pending for it. */
  async delete(sessionId: string): Promise<void> {
    await this.subvolumes.delete(this.path(sessionId));
    await this.setPendingStart(sessionId, null);
  }

  /** Makes the session's next sandbox start from `pending` (a restore or fork from a full checkpoint), or as usual (null). */
  async setPendingStart(sessionId: string, pending: PendingStart | null): Promise<void> {
    const file = this.pendingStartFile(sessionId);
    if (pending === null) await rm(file, { force: true });
    else await writeFile(file, JSON.stringify(pending), { mode: 0o600 });
  }

  /** What the session's next sandbox starts from, if a restore or fork left something pending; consumed. */
  async takePendingStart(sessionId: string): Promise<PendingStart | null> {
    const file = this.pendingStartFile(sessionId);
    if (!(await pathExists(file))) return null;
    const pending = await readJsonFile(file, PendingStartSchema);
    await this.setPendingStart(sessionId, null);
    return pending;
  }

  /**
   * Removes what a crash left among the volumes: pooled sandboxes' volumes, and a restore's staging
   * copy while the volume itself is still whole. A staging copy whose volume is gone is the restore's
   * complete result (the old volume is deleted only once the copy is made): the restore is finished.
   * A leftover that cannot be removed is logged, never a reason to refuse to start. Returns how many
   * were removed or finished.
   */
  async removeLeftovers(): Promise<number> {
    let removed = 0;
    for (const entry of await readdir(this.volume.dir('volumes')).catch(() => [] as string[])) {
      if (!entry.endsWith('.restoring') && !entry.startsWith(`${unclaimedPrefix}_`)) continue;
      const leftover = this.volume.dir('volumes', entry);
      const restored = entry.endsWith('.restoring') ? this.volume.dir('volumes', entry.slice(0, -'.restoring'.length)) : null;
      try {
        if (restored && !(await this.subvolumes.exists(restored))) {
          await this.subvolumes.rename(leftover, restored);
          this.log.warn(`finished the restore of volumes/${path.basename(restored)} that a crash interrupted`);
        } else await this.subvolumes.delete(leftover);
        removed++;
      } catch (err) {
        this.log.warn(`could not remove the leftover volumes/${entry}: ${(err as Error).message}`);
      }
    }
    return removed;
  }

  private pendingStartFile(sessionId: string): string {
    return `${this.path(sessionId)}.memory-from`;
  }
}
