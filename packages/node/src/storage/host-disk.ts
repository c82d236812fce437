import { stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, SpaceError } from '@space/protocol';
import type { Logger } from '../logger.js';

/** How the node's storage stands: `low` once its image's host filesystem has less free than the reserve. */
export type StorageStatus = 'ok' | 'low' | 'read-only';

export interface StorageState {
  status: StorageStatus;
  /** Free on the filesystem holding the image, bytes (null: not a loop image, or not read yet). */
  hostFreeBytes: number | null;
}

export interface HostDiskDeps {
  /** The btrfs image file, or null when the storage is a real block device (nothing to watch on the host). */
  image: string | null;
  /** Whether btrfs turned the storage read-only (`BtrfsVolume.isReadOnly`). */
  readOnly: () => Promise<boolean>;
  /** Below this much free on the image's host filesystem, new sessions and full checkpoints are refused (0: never). */
  reserveBytes: number;
  log: Logger;
  /** What the host says, by default the real one (tests pass their own). */
  freeBytes?: (dir: string) => Promise<number>;
}

const MB = 2 ** 20;
const watchEveryMs = 5000;

/**
 * The host disk under the node's sparse btrfs image. When that filesystem fills, the loop device's
 * writes fail and btrfs turns read-only with the last second of writes lost (measured: a 2 GB image
 * on a 300 MB filesystem, 400 MB written), and every session of the node stops writing. So the node
 * warns at start when the image could outgrow the free space, refuses what grows its data most (new
 * sessions, full checkpoints' memory images) once less than the reserve is free, and says loudly
 * when btrfs did turn read-only.
 */
export class HostDiskWatch {
  private current: StorageState = { status: 'ok', hostFreeBytes: null };
  private timer: NodeJS.Timeout | null = null;
  private readonly freeBytes: (dir: string) => Promise<number>;

  constructor(private readonly deps: HostDiskDeps) {
    this.freeBytes =
      deps.freeBytes ??
      (async (dir) => {
        const fs = await statfs(dir);
        return fs.bavail * fs.bsize;
      });
  }

  get state(): StorageState {
    return { ...this.current };
  }

  /** Looks once, says at start what a full host disk would do, and looks again every few seconds. */
  async start(sizeBytes: number): Promise<string> {
    await this.check();
    this.timer = setInterval(() => void this.check().catch((err: Error) => this.deps.log.warn(`host disk: ${err.message}`)), watchEveryMs);
    this.timer.unref();
    const { image } = this.deps;
    if (image === null || this.current.hostFreeBytes === null) return 'on a block device of its own';
    const holds = (await stat(image)).blocks * 512;
    const free = this.current.hostFreeBytes;
    const said = `image may grow to ${gb(sizeBytes)} (holds ${gb(holds)}), ${gb(free)} free on its host filesystem, reserve ${Math.round(this.deps.reserveBytes / MB)} MB`;
    if (sizeBytes - holds > free)
      this.deps.log.warn(
        `the node's btrfs image (${image}) may grow to ${gb(sizeBytes)} but its host filesystem has ${gb(free)} free: filled, btrfs turns read-only and loses its last writes. Below SPACE_HOST_DISK_RESERVE_MB free, new sessions and full checkpoints are refused; free space, lower SPACE_VOLUME_SIZE_GB (a new image), or give the data directory a disk of its own`,
      );
    return said;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Reads the host again; says each change of status. */
  async check(): Promise<StorageState> {
    const { image, reserveBytes } = this.deps;
    const hostFreeBytes = image === null ? null : await this.freeBytes(path.dirname(image));
    const readOnly = await this.deps.readOnly();
    const status: StorageStatus = readOnly ? 'read-only' : hostFreeBytes !== null && reserveBytes > 0 && hostFreeBytes < reserveBytes ? 'low' : 'ok';
    if (status !== this.current.status) this.tell(status, hostFreeBytes);
    this.current = { status, hostFreeBytes };
    return this.state;
  }

  /** Refuses `what` (a new session, a full checkpoint) with `code` while the storage is low or read-only. */
  refuseIfLow(what: string, code: ErrorCode = ErrorCode.NO_SPACE): void {
    const { status, hostFreeBytes } = this.current;
    if (status === 'ok') return;
    if (status === 'read-only')
      throw new SpaceError(
        code,
        `${what} refused: this node's storage turned read-only (its host filesystem filled?); the node must be restarted once space is freed`,
      );
    throw new SpaceError(
      code,
      `${what} refused: this node's host disk has ${Math.round((hostFreeBytes ?? 0) / MB)} MB free, under its reserve (SPACE_HOST_DISK_RESERVE_MB=${Math.round(this.deps.reserveBytes / MB)}); sessions already running go on`,
    );
  }

  private tell(status: StorageStatus, hostFreeBytes: number | null): void {
    const free = hostFreeBytes === null ? '' : ` (${Math.round(hostFreeBytes / MB)} MB free on the image's host filesystem)`;
    if (status === 'read-only')
      this.deps.log.error(
        `the node's btrfs filesystem turned read-only${free}: no session of this node can write; free space on the host and restart the node agent`,
      );
    else if (status === 'low')
      this.deps.log.warn(`the node's host disk is below its reserve${free}: new sessions and full checkpoints are refused until space is freed`);
    else this.deps.log.info(`the node's host disk is above its reserve again${free}`);
  }
}

function gb(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(1)} GB`;
}
