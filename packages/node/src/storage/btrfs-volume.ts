import { mkdir, open, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { runCommand } from '../run-command.js';
import { pathExists } from './path-exists.js';
import { enableSimpleQuotas } from './volume-quotas.js';

/**
 * How much written data may wait in the host's page cache before it reaches the volume. Every fs
 * checkpoint must write out what is waiting (a snapshot holds only what is on disk), so this bounds
 * a checkpoint's time after a large write; writers past it go at the disk's speed.
 */
export interface WritebackBound {
  /** Dirty data of the whole volume at most (`SPACE_VOLUME_DIRTY_MB`); 0 leaves the kernel's defaults. */
  dirtyMb: number;
  /** btrfs commits its transaction at least this often (`SPACE_VOLUME_COMMIT_SEC`; btrfs's default is 30). */
  commitSec: number;
}

/**
 * The node's btrfs filesystem: a sparse image file loop-mounted under the data directory (a real
 * block device in production works the same once mounted at `mountPoint`).
 */
export class BtrfsVolume {
  readonly image: string;
  readonly mountPoint: string;
  /** The volume's writeback device in sysfs, once the bound is applied (null: not bounded). */
  private boundDevice: string | null = null;
  /** Writes under way that the bound is lifted for (memory images, written while their sandbox is paused). */
  private unboundedWriters = 0;

  constructor(
    dataDir: string,
    private readonly sizeGb: number,
    private readonly writeback: WritebackBound = { dirtyMb: 0, commitSec: 30 },
  ) {
    this.image = path.join(dataDir, 'btrfs.img');
    this.mountPoint = path.join(dataDir, 'btrfs');
  }

  /** Mounts the volume (creating its image the first time); returns the quotas and writeback bound in force. */
  async mount(): Promise<string> {
    await mkdir(this.mountPoint, { recursive: true });
    if (!(await this.isMounted())) await this.mountImage();
    const { stdout } = await runCommand(['btrfs', 'filesystem', 'show', this.mountPoint]);
    const uuid = /uuid: ([0-9a-f-]{36})/.exec(stdout)?.[1];
    if (!uuid) throw new Error(`no uuid in "btrfs filesystem show ${this.mountPoint}": ${stdout.trim()}`);
    const sysfsDir = `/sys/fs/btrfs/${uuid}`;
    const quotas = await enableSimpleQuotas(this.mountPoint, sysfsDir);
    return `${quotas}; ${await this.writeDirectly()}; ${await this.boundWriteback(`${sysfsDir}/bdi`)}`;
  }

  private async mountImage(): Promise<void> {
    if (!(await pathExists(this.image))) {
      const handle = await open(this.image, 'w');
      await handle.truncate(this.sizeGb * 1024 * 1024 * 1024);
      await handle.close();
      await runCommand(['mkfs.btrfs', '-q', '-L', 'space', this.image]);
    }
    // `mount -o loop` picks a free loop device and, with autoclear, frees it again on unmount.
    await runCommand(['mount', '-o', 'loop,noatime,compress=zstd:1', this.image, this.mountPoint]);
  }

  /**
   * Switches the loop device to direct I/O (also on a volume mounted before: it works while mounted).
   * Buffered, every block is cached twice, and the image file's own dirty pages in the host's page
   * cache (up to a fifth of its memory) must reach the disk at every btrfs commit: on a scratch
   * volume (bench/loop-writeback.sh), a snapshot right after 500 MB were written took up to 146 ms
   * buffered and 7-12 ms direct, with the same 16 MB bound. Not a loop device (a real disk): nothing to do.
   */
  private async writeDirectly(): Promise<string> {
    const device = await this.mountedFrom();
    if (!device?.startsWith('/dev/loop')) return 'not a loop device';
    const { code, stderr } = await runCommand(['losetup', '--direct-io=on', device], { allowFailure: true });
    if (code !== 0) return `loop device buffered (direct I/O refused: ${stderr.trim()})`;
    return 'loop device writes directly to its image';
  }

  /** The image file the volume is loop-mounted from, or null when a block device of its own is mounted there. */
  async backingImage(): Promise<string | null> {
    return (await this.mountedFrom())?.startsWith('/dev/loop') ? this.image : null;
  }

  /** Whether btrfs turned the volume read-only (it does when writes to its device fail: a full host disk under its image). */
  async isReadOnly(): Promise<boolean> {
    return (await this.mountEntry())?.options.includes('ro') ?? false;
  }

  /** The loop devices bound to the volume's image (normally one). */
  private async loopDevices(): Promise<string[]> {
    const { stdout } = await runCommand(['losetup', '-n', '-O', 'NAME', '-j', this.image], { allowFailure: true });
    return stdout
      .split('\n')
      .map((line) => line.trim())
      .filter((device) => device.startsWith('/dev/loop'));
  }

  /**
   * Applied at every start, also to a volume mounted before (the settings may have changed). `bdi`:
   * the filesystem's own writeback device (btrfs-N), so the limit holds for it alone, not the host.
   */
  private async boundWriteback(bdi: string): Promise<string> {
    const { dirtyMb, commitSec } = this.writeback;
    this.boundDevice = null;
    await runCommand(['mount', '-o', `remount,commit=${commitSec}`, this.mountPoint]);
    if (!(await pathExists(`${bdi}/strict_limit`))) return `commit every ${commitSec} s; dirty data not bounded (per-device limits need Linux 6.2 or later)`;
    await writeFile(`${bdi}/strict_limit`, dirtyMb > 0 ? '1' : '0');
    if (dirtyMb === 0) {
      await writeFile(`${bdi}/max_ratio`, '100');
      return `commit every ${commitSec} s; dirty data not bounded (SPACE_VOLUME_DIRTY_MB=0)`;
    }
    await writeFile(`${bdi}/max_bytes`, String(dirtyMb * 2 ** 20));
    this.boundDevice = bdi;
    return `commit every ${commitSec} s; at most ${dirtyMb} MB of dirty data`;
  }

  /**
   * Runs `write` with the writeback bound lifted: a memory image is written while its sandbox is
   * paused, and throttled to the disk's speed it would pause a 100 MB sandbox 388 ms instead of 280.
   * The image reaches the disk afterwards, in the background.
   */
  async unbounded<T>(write: () => Promise<T>): Promise<T> {
    const bdi = this.boundDevice;
    if (!bdi) return write();
    this.unboundedWriters++;
    try {
      if (this.unboundedWriters === 1) await writeFile(`${bdi}/strict_limit`, '0');
      return await write();
    } finally {
      if (--this.unboundedWriters === 0) await writeFile(`${bdi}/strict_limit`, '1').catch(() => undefined);
    }
  }

  async unmount(): Promise<void> {
    if (!(await this.isMounted())) return;
    await runCommand(['umount', this.mountPoint]);
    // A loop device still bound to our image (e.g. after a crash) is detached too.
    for (const device of await this.loopDevices()) await runCommand(['losetup', '-d', device], { allowFailure: true });
  }

  async isMounted(): Promise<boolean> {
    return (await this.mountedFrom()) !== null;
  }

  /** The device the volume is mounted from, null when it is not mounted. */
  private async mountedFrom(): Promise<string | null> {
    return (await this.mountEntry())?.device ?? null;
  }

  /** The volume's mount as /proc/self/mounts shows it, null when it is not mounted. */
  private async mountEntry(): Promise<{ device: string; options: string[] } | null> {
    const mounts = await readFile('/proc/self/mounts', 'utf8');
    const fields = mounts
      .split('\n')
      .map((line) => line.split(' '))
      .find((f) => f[1] === this.mountPoint);
    return fields ? { device: fields[0]!, options: fields[3]?.split(',') ?? [] } : null;
  }

  dir(...parts: string[]): string {
    return path.join(this.mountPoint, ...parts);
  }
}
