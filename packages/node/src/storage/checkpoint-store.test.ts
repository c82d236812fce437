import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { BtrfsVolume } from './btrfs-volume.js';
import { CheckpointStore } from './checkpoint-store.js';
import { Subvolumes } from './subvolumes.js';

// A real btrfs filesystem in a loop-mounted image (needs root, as SPACE does).
const dataDir = mkdtempSync(path.join(tmpdir(), 'space-checkpoints-'));
const volume = new BtrfsVolume(dataDir, 1);
const subvolumes = new Subvolumes();
const store = new CheckpointStore(volume, subvolumes);

before(() => volume.mount());
after(async () => {
  await volume.unmount();
  rmSync(dataDir, { recursive: true, force: true });
});

async function newVolume(name: string): Promise<string> {
  const dir = volume.dir('volumes', name);
  await subvolumes.create(dir);
  await writeFile(path.join(dir, 'file'), 'first');
  return dir;
}

test('a snapshot onto an existing path is refused instead of landing inside it', async () => {
  const v = await newVolume('ses_refuse01');
  await subvolumes.snapshot(v, `${v}.copy`, { readOnly: false });
  await assert.rejects(subvolumes.snapshot(v, `${v}.copy`, { readOnly: false }), /already exists/);
  assert.equal(existsSync(path.join(`${v}.copy`, 'ses_refuse01')), false);
});

test('a subvolume with snapshots nested inside (left by an older race) is deleted whole', async () => {
  const v = await newVolume('ses_nested01');
  const leftover = `${v}.restoring`;
  await subvolumes.create(leftover);
  // What two restores racing used to leave: a snapshot inside the staging copy, and one inside that.
  await mkdir(path.join(leftover, 'deeper'));
  await subvolumes.create(path.join(leftover, 'deeper', 'ckp_inner0001'));
  await subvolumes.create(path.join(leftover, 'deeper', 'ckp_inner0001', 'ckp_inner0002'));
  await subvolumes.delete(leftover);
  assert.equal(existsSync(leftover), false);
  assert.equal(readFileSync(path.join(v, 'file'), 'utf8'), 'first', 'the volume beside it is untouched');
});

test('deletes of one subvolume at once all succeed (the fuzzer sent two DELETEs of one volume snapshot)', async () => {
  const v = await newVolume('ses_twice001');
  const snapshot = `${v}.snapshot`;
  await subvolumes.snapshot(v, snapshot, { readOnly: true });
  await Promise.all(Array.from({ length: 4 }, () => subvolumes.delete(snapshot)));
  assert.equal(existsSync(snapshot), false);
});

test('a volume counts as changed since a checkpoint only after something was written to it', async () => {
  const v = await newVolume('ses_changes01');
  await store.take(v, 'ckp_changes0001');
  assert.equal(await store.changedSince(v, 'ckp_changes0001'), false, 'right after the checkpoint');
  assert.equal(await store.changedSince(v, 'ckp_changes0001'), false, 'asking again changes nothing');
  await writeFile(path.join(v, 'file'), 'second');
  assert.equal(await store.changedSince(v, 'ckp_changes0001'), true, 'after a write');
  await store.take(v, 'ckp_changes0002');
  assert.equal(await store.changedSince(v, 'ckp_changes0002'), false, 'after the next checkpoint');
  assert.equal(await store.changedSince(v, 'ckp_missing0001'), true, 'a checkpoint that is not here');
});

test('materialize replaces a volume with a writable copy of a checkpoint, even over a leftover staging copy', async () => {
  const v = await newVolume('ses_material1');
  await store.take(v, 'ckp_material01');
  await writeFile(path.join(v, 'file'), 'later');
  await subvolumes.create(`${v}.restoring`);
  await subvolumes.create(path.join(`${v}.restoring`, 'ckp_stale00001'));
  await store.materialize('ckp_material01', v);
  assert.equal(readFileSync(path.join(v, 'file'), 'utf8'), 'first');
  assert.equal(existsSync(`${v}.restoring`), false);
  assert.equal(existsSync(path.join(v, 'ckp_material01')), false);
});
