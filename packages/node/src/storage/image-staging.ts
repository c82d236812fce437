import { createHash } from 'node:crypto';
import { cp, mkdir, readFile, rm, statfs } from 'node:fs/promises';
import path from 'node:path';
import { pathExists } from './path-exists.js';

/** Host memory every staged image leaves free: the host's other work goes first. */
const keepFreeBytes = 512 * 2 ** 20;
/** A memory image is at most about its sandbox's memory; this margin covers what the estimate misses. */
const estimateMargin = 1.25;

/** An upper bound of the memory image of a sandbox taking `sandboxBytes` of host memory. */
export function imageBytesEstimate(sandboxBytes: number): number {
  return Math.ceil(sandboxBytes * estimateMargin);
}

/** A directory in host memory that one memory image is written to, reserved until released. */
export interface StagedImage {
  readonly dir: string;
  /** Copies the image into `target` (on the volume) and frees its memory. */
  moveTo(target: string): Promise<void>;
  /** Frees the reservation and whatever is still staged; safe to call more than once. */
  release(): Promise<void>;
}

/**
 * Where a full checkpoint writes its memory image. The sandbox stays paused until the write ends,
 * and host memory (a directory in the tmpfs `/dev/shm`) takes it twice as fast as the volume (105 MB:
 * 63-76 ms against 138-157); the image moves to the volume once the sandbox runs on. Bounded by
 * `maxBytes` for all images staged at once, the tmpfs's free space and the host's available memory;
 * an image that does not fit is written to the volume directly.
 */
export class ImageStaging {
  readonly dir: string;
  private reservedBytes = 0;

  /** `dataDir`: the node's, so that nodes sharing a host stage apart. `maxBytes` 0: never staged. */
  constructor(
    dataDir: string,
    private readonly maxBytes: number,
    readonly root = '/dev/shm',
  ) {
    this.dir = path.join(root, `space-images-${createHash('sha256').update(dataDir).digest('hex').slice(0, 12)}`);
  }

  /** Removes what a crashed node left staged; returns where images are written, for the log. */
  async prepare(): Promise<string> {
    await rm(this.dir, { recursive: true, force: true });
    if (this.maxBytes === 0) return 'written to the volume (SPACE_CHECKPOINT_STAGING_MB=0)';
    if (!(await pathExists(this.root))) return `written to the volume (no ${this.root} to stage them in)`;
    await mkdir(this.dir, { mode: 0o700 });
    return `staged in ${this.dir} while their sandbox is paused (at most ${Math.round(this.maxBytes / 2 ** 20)} MB at once)`;
  }

  /** Removes every staged image (at stop: no checkpoint is under way any more). */
  async clear(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }

  /**
   * A directory for the image of a sandbox taking `sandboxBytes` of host memory (an upper bound of
   * its image), or null when it does not fit now: the image is then written to the volume.
   */
  async reserve(name: string, sandboxBytes: number): Promise<StagedImage | null> {
    if (this.maxBytes === 0 || !(await pathExists(this.dir))) return null;
    const bytes = imageBytesEstimate(sandboxBytes);
    const [space, available] = await Promise.all([statfs(this.dir), availableMemory()]);
    // Decided after the awaits, so that reservations made meanwhile (checkpoints of other sessions)
    // count. Free space and memory already count the images being written now, not the rest of theirs.
    const room = Math.min(this.maxBytes, space.bavail * space.bsize, available - keepFreeBytes) - this.reservedBytes;
    if (bytes > room) return null;
    this.reservedBytes += bytes;
    const dir = path.join(this.dir, name);
    let held = true;
    const release = async (): Promise<void> => {
      await rm(dir, { recursive: true, force: true });
      if (held) this.reservedBytes -= bytes;
      held = false;
    };
    try {
      await mkdir(dir, { mode: 0o700 });
    } catch (err) {
      await release();
      throw err;
    }
    return {
      dir,
      moveTo: async (target) => {
        await cp(dir, target, { recursive: true });
        await release();
      },
      release,
    };
  }
}

/** MemAvailable of /proc/meminfo in bytes: what the host can give without swapping. */
async function availableMemory(): Promise<number> {
  const meminfo = await readFile('/proc/meminfo', 'utf8');
  const kb = /^MemAvailable:\s+(\d+) kB/m.exec(meminfo)?.[1];
  return kb ? Number(kb) * 1024 : 0;
}
