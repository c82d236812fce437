import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ImageStaging } from './image-staging.js';

const MB = 2 ** 20;
const work = mkdtempSync(path.join(tmpdir(), 'space-image-staging-'));
after(() => rmSync(work, { recursive: true, force: true }));

test('images are staged in /dev/shm, apart per data directory, and what a crash left is removed at start', async () => {
  const staging = new ImageStaging(path.join(work, 'data-a'), 64 * MB);
  const other = new ImageStaging(path.join(work, 'data-b'), 64 * MB);
  assert.notEqual(staging.dir, other.dir);
  assert.ok(staging.dir.startsWith('/dev/shm/space-images-'));
  try {
    mkdirSync(path.join(staging.dir, 'ckp_left'), { recursive: true });
    assert.match(await staging.prepare(), /^staged in \/dev\/shm\/space-images-\w+ while their sandbox is paused \(at most 64 MB at once\)$/);
    assert.equal(existsSync(path.join(staging.dir, 'ckp_left')), false);
    assert.equal(statSync(staging.dir).mode & 0o777, 0o700, 'images hold the sandbox memory: root only');
  } finally {
    await staging.clear();
  }
  assert.equal(existsSync(staging.dir), false);
});

test('reservations stay within the budget together; an image that does not fit is not staged', async () => {
  const staging = new ImageStaging(path.join(work, 'data-c'), 64 * MB, work);
  await staging.prepare();
  // 20 MB of sandbox memory reserve 25 MB (the margin): two fit in 64 MB, a third does not.
  const first = await staging.reserve('ckp_1', 20 * MB);
  const second = await staging.reserve('ckp_2', 20 * MB);
  assert.ok(first && second);
  assert.equal(await staging.reserve('ckp_3', 20 * MB), null);
  await first.release();
  await first.release(); // twice frees once
  const third = await staging.reserve('ckp_3', 20 * MB);
  assert.ok(third, 'room again once one was released');
  assert.equal(await staging.reserve('ckp_4', 20 * MB), null);
  await Promise.all([second.release(), third.release()]);
  assert.equal(await staging.reserve('ckp_big', 60 * MB), null, 'larger than the whole budget');
  // Asked for at once (full checkpoints of two sessions): one fits, the other is not staged.
  const together = await Promise.all([staging.reserve('ckp_5', 40 * MB), staging.reserve('ckp_6', 40 * MB)]);
  assert.equal(together.filter(Boolean).length, 1);
  await Promise.all(together.map((staged) => staged?.release()));
  // More than the host has: never staged, whatever the budget.
  const unbounded = new ImageStaging(path.join(work, 'data-d'), 2 ** 50, work);
  await unbounded.prepare();
  assert.equal(await unbounded.reserve('ckp_huge', 2 ** 48), null);
});

test('a staged image moves to its target and frees its memory', async () => {
  const staging = new ImageStaging(path.join(work, 'data-e'), 64 * MB, work);
  await staging.prepare();
  const staged = await staging.reserve('ckp_move', 40 * MB);
  assert.ok(staged);
  writeFileSync(path.join(staged.dir, 'pages.img'), Buffer.alloc(MB, 1));
  writeFileSync(path.join(staged.dir, 'checkpoint.img'), 'state');
  const target = path.join(work, 'volume', 'ckp_move.partial');
  await staged.moveTo(target);
  assert.equal(readFileSync(path.join(target, 'checkpoint.img'), 'utf8'), 'state');
  assert.equal(statSync(path.join(target, 'pages.img')).size, MB);
  assert.equal(existsSync(staged.dir), false);
  await staged.release(); // after the move: nothing left to free, the budget counted once
  assert.ok(await staging.reserve('ckp_next', 40 * MB), 'the whole budget is free again');
});

test('staging off (0) or without its tmpfs: images go to the volume', async () => {
  const off = new ImageStaging(path.join(work, 'data-f'), 0, work);
  assert.equal(await off.prepare(), 'written to the volume (SPACE_CHECKPOINT_STAGING_MB=0)');
  assert.equal(await off.reserve('ckp_1', MB), null);
  const missing = path.join(work, 'no-such-tmpfs');
  const noRoot = new ImageStaging(path.join(work, 'data-g'), 64 * MB, missing);
  assert.equal(await noRoot.prepare(), `written to the volume (no ${missing} to stage them in)`);
  assert.equal(await noRoot.reserve('ckp_1', MB), null);
});
