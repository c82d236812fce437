import { existsSync } from 'node:fs';
import { mkdir, open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { runCommand } from '../run-command.js';

/**
 * The node's btrfs filesystem: a sparse image file loop-mounted under the data directory (a real
 * block device in production works the same once mounted at `mountPoint`).
 */
export class BtrfsVolume {
  readonly image: string;
  readonly mountPoint: string;

  constructor(
    dataDir: string,
    private readonly sizeGb: number,
  ) {
    this.image = path.join(dataDir, 'btrfs.img');
    this.mountPoint = path.join(dataDir, 'btrfs');
  }

  async mount(): Promise<void> {
    await mkdir(this.mountPoint, { recursive: true });
    if (await this.isMounted()) return;
    if (!existsSync(this.image)) {
      const handle = await open(this.image, 'w');
      await handle.truncate(this.sizeGb * 1024 * 1024 * 1024);
      await handle.close();
      await runCommand(['mkfs.btrfs', '-q', '-L', 'space', this.image]);
    }
    // `mount -o loop` picks a free loop device and, with autoclear, frees it again on unmount.
    await runCommand(['mount', '-o', 'loop,noatime,compress=zstd:1', this.image, this.mountPoint]);
    // Quota groups hold each session's volume to its disk size (a no-op when already enabled).
    await runCommand(['btrfs', 'quota', 'enable', this.mountPoint]);
  }

  async unmount(): Promise<void> {
    if (!(await this.isMounted())) return;
    await runCommand(['umount', this.mountPoint]);
    // A loop device still bound to our image (e.g. after a crash) is detached too.
    const { stdout } = await runCommand(['losetup', '-j', this.image], { allowFailure: true });
    for (const line of stdout.split('\n')) {
      const device = line.split(':')[0];
      if (device?.startsWith('/dev/loop')) await runCommand(['losetup', '-d', device], { allowFailure: true });
    }
  }

  async isMounted(): Promise<boolean> {
    const mounts = await readFile('/proc/self/mounts', 'utf8');
    return mounts.split('\n').some((line) => line.split(' ')[1] === this.mountPoint);
  }

  dir(...parts: string[]): string {
    return path.join(this.mountPoint, ...parts);
  }
}
