import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { ErrorCode, type SpaceError } from '@space/protocol';
import { runCommand } from '../run-command.js';
import { BtrfsVolume } from './btrfs-volume.js';
import { HostDiskWatch } from './host-disk.js';

const MB = 2 ** 20;

function recordingLog() {
  const lines: string[] = [];
  return {
    lines,
    log: { info: (m: string) => lines.push(`info ${m}`), warn: (m: string) => lines.push(`warn ${m}`), error: (m: string) => lines.push(`error ${m}`) },
  };
}

test('the host disk under a real loop-mounted btrfs image: warned of at start, low below the reserve (new sessions and full checkpoints refused), read-only once filled', {
  timeout: 120_000,
}, async () => {
  // The node's data directory on a host filesystem of 192 MB, its sparse image 1 GB (needs root, as SPACE does).
  const host = mkdtempSync(path.join(tmpdir(), 'space-host-disk-'));
  await runCommand(['mount', '-t', 'tmpfs', '-o', 'size=192m', 'tmpfs', host]);
  const dataDir = path.join(host, 'data');
  mkdirSync(dataDir);
  const volume = new BtrfsVolume(dataDir, 1);
  try {
    await volume.mount();
    const { lines, log } = recordingLog();
    const watch = new HostDiskWatch({ image: await volume.backingImage(), readOnly: () => volume.isReadOnly(), reserveBytes: 96 * MB, log });
    try {
      const said = await watch.start(2 ** 30);
      assert.match(said, /^image may grow to 1\.0 GB \(holds 0\.\d GB\), 0\.\d GB free on its host filesystem, reserve 96 MB$/);
      assert.match(
        lines.join('\n'),
        /warn the node's btrfs image .* may grow to 1\.0 GB but its host filesystem has 0\.\d GB free: filled, btrfs turns read-only/,
      );
      assert.equal(watch.state.status, 'ok');
      watch.refuseIfLow('a new session');

      // Written into btrfs, the image grows on the host until less than the reserve is free.
      await runCommand(['sh', '-c', `head -c ${120 * MB} /dev/urandom > ${volume.mountPoint}/data && sync`]);
      const low = await watch.check();
      assert.equal(low.status, 'low');
      assert.ok(low.hostFreeBytes! < 96 * MB, `${low.hostFreeBytes} bytes free`);
      assert.throws(
        () => watch.refuseIfLow('a new session'),
        (err: SpaceError) =>
          err.code === ErrorCode.NO_SPACE &&
          err.status === 507 &&
          /a new session refused: .* MB free, under its reserve \(SPACE_HOST_DISK_RESERVE_MB=96\)/.test(err.message),
      );
      assert.throws(() => watch.refuseIfLow('a full checkpoint', ErrorCode.FULL_CHECKPOINT_REFUSED), { code: ErrorCode.FULL_CHECKPOINT_REFUSED });
      assert.match(lines.at(-1)!, /^warn the node's host disk is below its reserve \(\d+ MB free/);

      // Past what the host holds: the loop device's writes fail and btrfs turns read-only, as the watch says.
      await runCommand(['sh', '-c', `head -c ${200 * MB} /dev/urandom > ${volume.mountPoint}/more; sync`], { allowFailure: true });
      assert.equal((await watch.check()).status, 'read-only');
      assert.throws(() => watch.refuseIfLow('a new session'), /this node's storage turned read-only/);
      assert.match(lines.at(-1)!, /^error the node's btrfs filesystem turned read-only/);
    } finally {
      watch.stop();
    }
  } finally {
    await volume.unmount().catch(() => runCommand(['umount', '-l', volume.mountPoint], { allowFailure: true }));
    await runCommand(['umount', host], { allowFailure: true });
    rmSync(host, { recursive: true, force: true });
  }
});

test('a node on a block device of its own watches only for btrfs turning read-only; a reserve of 0 never refuses', async () => {
  const { log } = recordingLog();
  let readOnly = false;
  const device = new HostDiskWatch({ image: null, readOnly: async () => readOnly, reserveBytes: 1024 * MB, log });
  assert.equal(await device.start(2 ** 40), 'on a block device of its own');
  device.stop();
  assert.deepEqual(device.state, { status: 'ok', hostFreeBytes: null });
  readOnly = true;
  assert.equal((await device.check()).status, 'read-only');

  const never = new HostDiskWatch({ image: '/x/btrfs.img', readOnly: async () => false, reserveBytes: 0, log, freeBytes: async () => 0 });
  assert.equal((await never.check()).status, 'ok');
  never.refuseIfLow('a new session');
});
