import { mkdir, open, readFile, readdir, unlink } from 'node:fs/promises';
import path from 'node:path';

export interface Lease {
  index: number;
  hostIp: string;
  sandboxIp: string;
  prefix: number;
}

/**
 * Hands out /30 subnets from 10.213.0.0/16 to sandboxes. Leases are files created with O_EXCL in
 * a host-wide directory, so several SPACE instances on one machine never hand out the same subnet.
 */
export class IpLeases {
  private static readonly blocks = 16384;

  constructor(private readonly dir = '/run/space/ip-leases') {}

  async acquire(owner: string): Promise<Lease> {
    await mkdir(this.dir, { recursive: true });
    const start = Math.floor(Math.random() * IpLeases.blocks);
    for (let i = 0; i < IpLeases.blocks; i++) {
      const index = (start + i) % IpLeases.blocks;
      try {
        const handle = await open(path.join(this.dir, String(index)), 'wx');
        await handle.writeFile(owner);
        await handle.close();
        return IpLeases.describe(index);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
    throw new Error('no free sandbox subnet left in 10.213.0.0/16');
  }

  async release(index: number): Promise<void> {
    await unlink(path.join(this.dir, String(index))).catch(() => undefined);
  }

  /** Leases whose owner string satisfies `isStale` are released (after a crash). */
  async releaseWhere(isStale: (owner: string) => boolean): Promise<number> {
    let released = 0;
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      const owner = await readFile(path.join(this.dir, name), 'utf8').catch(() => '');
      if (isStale(owner)) {
        await this.release(Number(name));
        released++;
      }
    }
    return released;
  }

  static describe(index: number): Lease {
    const base = index * 4;
    const third = Math.floor(base / 256);
    const fourth = base % 256;
    return { index, hostIp: `10.213.${third}.${fourth + 1}`, sandboxIp: `10.213.${third}.${fourth + 2}`, prefix: 30 };
  }
}
