import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { runCommand } from '../run-command.js';
import { BtrfsVolume } from './btrfs-volume.js';
import { Subvolumes } from './subvolumes.js';

// A real btrfs filesystem in a loop-mounted image (needs root, as SPACE does).
const dataDir = mkdtempSync(path.join(tmpdir(), 'space-btrfs-volume-'));
after(async () => {
  await new BtrfsVolume(dataDir, 1).unmount();
  rmSync(dataDir, { recursive: true, force: true });
});

function mountOptions(mountPoint: string): string[] {
  const line = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .find((l) => l.split(' ')[1] === mountPoint);
  assert.ok(line, `${mountPoint} is mounted`);
  return line.split(' ')[3]!.split(',');
}

async function sysfsDir(mountPoint: string): Promise<string> {
  const { stdout } = await runCommand(['btrfs', 'filesystem', 'show', mountPoint]);
  return `/sys/fs/btrfs/${/uuid: (\S+)/.exec(stdout)![1]}`;
}

test('the writeback bound is applied at every mount, also to a volume mounted before', async (t) => {
  const bounded = new BtrfsVolume(dataDir, 1, { dirtyMb: 8, commitSec: 2 });
  const said = await bounded.mount();
  assert.ok(mountOptions(bounded.mountPoint).includes('commit=2'));
  const bdi = `${await sysfsDir(bounded.mountPoint)}/bdi`;
  if (!existsSync(`${bdi}/strict_limit`)) {
    assert.match(said, /not bounded \(per-device limits need Linux 6.2/);
    t.skip('this kernel has no per-device dirty limits');
    return;
  }
  assert.equal(said, 'simple quotas; loop device writes directly to its image; commit every 2 s; at most 8 MB of dirty data');
  assert.equal(readFileSync(`${bdi}/strict_limit`, 'utf8').trim(), '1');
  // The kernel keeps the limit as a ratio of the dirty threshold: close to 8 MB, not exact.
  const maxBytes = Number(readFileSync(`${bdi}/max_bytes`, 'utf8'));
  assert.ok(Math.abs(maxBytes - 8 * 2 ** 20) < 2 ** 20, `max_bytes ${maxBytes}`);

  // Started again with other settings on the still-mounted volume: the new ones hold.
  const unbounded = new BtrfsVolume(dataDir, 1, { dirtyMb: 0, commitSec: 30 });
  assert.equal(
    await unbounded.mount(),
    'simple quotas; loop device writes directly to its image; commit every 30 s; dirty data not bounded (SPACE_VOLUME_DIRTY_MB=0)',
  );
  assert.ok(mountOptions(unbounded.mountPoint).includes('commit=30') || !mountOptions(unbounded.mountPoint).some((o) => o.startsWith('commit=')));
  assert.equal(readFileSync(`${bdi}/strict_limit`, 'utf8').trim(), '0');
  assert.equal(readFileSync(`${bdi}/max_ratio`, 'utf8').trim(), '100');
});

async function loopDevice(image: string): Promise<string> {
  const { stdout } = await runCommand(['losetup', '-n', '-O', 'NAME', '-j', image]);
  return stdout.trim().replace('/dev/', '');
}

test('the loop device writes directly to its image, also one mounted buffered by an older node', async () => {
  const volume = new BtrfsVolume(dataDir, 1);
  await volume.mount();
  const device = await loopDevice(volume.image);
  const directIo = () => readFileSync(`/sys/block/${device}/loop/dio`, 'utf8').trim();
  assert.equal(directIo(), '1');
  // What an older node left mounted: a buffered loop device.
  await runCommand(['losetup', '--direct-io=off', `/dev/${device}`]);
  assert.equal(directIo(), '0');
  assert.match(await volume.mount(), /; loop device writes directly to its image; /);
  assert.equal(directIo(), '1');
  assert.equal(await loopDevice(volume.image), device, 'the same device, still mounted');
});

test('a volume with full quotas (made by an older node) gets simple ones and keeps its limits', async () => {
  const volume = new BtrfsVolume(dataDir, 1);
  await volume.mount();
  const subvolumes = new Subvolumes();
  const limited = volume.dir('volumes', 'ses_quota00001');
  await subvolumes.create(limited);
  // What an older node left: full quotas, with a limit on a session's volume.
  await runCommand(['btrfs', 'quota', 'disable', volume.mountPoint]);
  await runCommand(['btrfs', 'quota', 'enable', volume.mountPoint]);
  await runCommand(['btrfs', 'quota', 'rescan', '-w', volume.mountPoint]);
  await subvolumes.limit(limited, 4 * 2 ** 20);
  // Full quotas keep the group of a deleted subvolume, with its limit: nothing to carry over.
  const deleted = volume.dir('volumes', 'ses_quota00002');
  await subvolumes.create(deleted);
  await subvolumes.limit(deleted, 2 ** 20);
  await subvolumes.delete(deleted);
  const sysfs = await sysfsDir(volume.mountPoint);
  assert.equal(readFileSync(`${sysfs}/qgroups/mode`, 'utf8').trim(), 'qgroup');

  assert.match(await volume.mount(), /^simple quotas \(converted from full quotas, 1 limit\(s\) kept\); /);
  assert.equal(readFileSync(`${sysfs}/qgroups/mode`, 'utf8').trim(), 'squota');
  assert.equal((await subvolumes.usage(limited))?.limitBytes, 4 * 2 ** 20);
  // The limit holds: 16 MB (incompressible: the volume compresses) do not fit in 4.
  const fill = async (): Promise<void> => {
    for (let i = 0; i < 4; i++) {
      await writeFile(path.join(limited, `part-${i}`), randomBytes(4 * 2 ** 20));
      await runCommand(['sync', '-f', limited]);
    }
  };
  await assert.rejects(fill(), /quota|-122/i); // EDQUOT, which Node names by number
  await subvolumes.delete(limited);
});
