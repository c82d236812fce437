import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { BtrfsVolume } from './btrfs-volume.js';
import { diffSnapshots } from './checkpoint-diff.js';
import { Subvolumes } from './subvolumes.js';

// A real btrfs filesystem in a loop-mounted image (needs root, as SPACE does).
const dataDir = mkdtempSync(path.join(tmpdir(), 'space-diff-'));
const volume = new BtrfsVolume(dataDir, 2);
const subvolumes = new Subvolumes();

before(() => volume.mount());
after(async () => {
  await volume.unmount();
  rmSync(dataDir, { recursive: true, force: true });
});

const sh = (dir: string, script: string) => execFileSync('sh', ['-ec', script], { cwd: dir });

test('a diff of two snapshots from btrfs send: added, removed, modified, renamed (a directory whole), mode; a 1 GB file touched in one byte', async () => {
  const vol = volume.dir('volumes', 'ses_diff0001');
  await subvolumes.create(vol);
  sh(
    vol,
    'mkdir -p app gone dir/sub && echo a > app/a.txt && echo v1 > app/atomic && echo keep > keep && echo x > gone/x && echo m > mode.sh && echo f > dir/sub/f && truncate -s 1G big && printf start | dd of=big conv=notrunc status=none',
  );
  const first = volume.dir('checkpoints', 'ckp_diff0001');
  await subvolumes.snapshot(vol, first, { readOnly: true });
  sh(
    vol,
    [
      'echo b >> app/a.txt',
      'mv keep kept',
      'rm -r gone',
      'chmod +x mode.sh',
      'echo new > "new file.txt"',
      'ln -s app link',
      'printf Z | dd of=big bs=1 seek=500000000 conv=notrunc status=none',
      'mv dir dir2',
      'mkdir d2',
      'ln app/a.txt hl',
      // An atomic write, as the agent and editors make one: a new file renamed over the old.
      'echo v2 > app/.swap && mv app/.swap app/atomic',
    ].join(' && '),
  );
  const second = volume.dir('checkpoints', 'ckp_diff0002');
  await subvolumes.snapshot(vol, second, { readOnly: true });

  const started = performance.now();
  const diff = await diffSnapshots(first, second);
  const tookMs = performance.now() - started;
  assert.deepEqual(
    diff.map((e) => [e.path, e.change, e.type, e.from ?? null, e.sizeBefore, e.sizeAfter]),
    [
      ['/app/a.txt', 'modified', 'file', null, 2, 4],
      ['/app/atomic', 'modified', 'file', null, 3, 3],
      ['/big', 'modified', 'file', null, 1 << 30, 1 << 30],
      ['/d2', 'added', 'directory', null, null, 0],
      ['/dir2', 'renamed', 'directory', '/dir', 6, 6],
      ['/gone', 'removed', 'directory', null, 2, null],
      ['/gone/x', 'removed', 'file', null, 2, null],
      ['/hl', 'added', 'file', null, null, 4],
      ['/kept', 'renamed', 'file', '/keep', 5, 5],
      ['/link', 'added', 'symlink', null, null, 3],
      ['/mode.sh', 'mode', 'file', null, 2, 2],
      ['/new file.txt', 'added', 'file', null, null, 4],
    ],
  );
  console.log(`# diff of a volume with a 1 GB file touched in one byte: ${tookMs.toFixed(1)} ms`);
  assert.deepEqual(await diffSnapshots(second, second), [], 'a checkpoint against itself');
  // Backwards, the same changes the other way round.
  const back = new Map((await diffSnapshots(second, first)).map((e) => [e.path, e.change]));
  assert.deepEqual([back.get('/gone/x'), back.get('/new file.txt'), back.get('/dir'), back.get('/keep')], ['added', 'removed', 'renamed', 'renamed']);
});
