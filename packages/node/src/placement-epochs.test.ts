import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parsePlacementHeader, placementHeaderValue } from '@space/protocol';
import { PlacementEpochs } from './placement-epochs.js';

async function inTempDir(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'space-epochs-'));
  try {
    await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('placement epochs: the newest per session rises, an older one is refused, a forgotten session starts again', () => {
  const epochs = PlacementEpochs.inMemory();
  epochs.admit(null);
  epochs.admit({ sessionId: 'ses_a', epoch: 2 });
  epochs.admit({ sessionId: 'ses_a', epoch: 2 });
  assert.throws(() => epochs.admit({ sessionId: 'ses_a', epoch: 1 }), /placed anew \(epoch 2\)/);
  epochs.admit({ sessionId: 'ses_a', epoch: 5 });
  assert.equal(epochs.epochOf('ses_a'), 5);
  epochs.forget('ses_a');
  epochs.admit({ sessionId: 'ses_a', epoch: 1 });
  assert.equal(epochs.epochOf('ses_a'), 1);
  assert.deepEqual(parsePlacementHeader(placementHeaderValue({ sessionId: 'ses_a', epoch: 7 })), { sessionId: 'ses_a', epoch: 7 });
  for (const bad of ['ses_a', 'ses_a -1', 'sbx_a 1', 'ses_a 1 2', ['ses_a 1']]) assert.equal(parsePlacementHeader(bad), null, String(bad));
});

test('placement epochs: kept across a restart in a log, a torn last line skipped', () =>
  inTempDir(async (dir) => {
    const file = path.join(dir, 'placement-epochs.log');
    const before = await PlacementEpochs.open(file);
    before.admit({ sessionId: 'ses_a', epoch: 4 });
    before.admit({ sessionId: 'ses_b', epoch: 1 });
    before.forget('ses_b');
    assert.equal(await readFile(file, 'utf8'), 'ses_a 4\nses_b 1\nses_b 0\n', 'one line appended per raise and per forgotten session');
    await writeFile(file, `${await readFile(file, 'utf8')}ses_c 9\nses_`);
    const after = await PlacementEpochs.open(file);
    assert.throws(() => after.admit({ sessionId: 'ses_a', epoch: 3 }), /PLACEMENT_STALE|placed anew/);
    assert.equal(after.epochOf('ses_b'), 0);
    assert.equal(after.epochOf('ses_c'), 9);
    assert.equal(await readFile(file, 'utf8'), 'ses_a 4\nses_c 9\n', 'written anew when opened: the torn line is gone before anything is appended');
    await writeFile(file, '{"ses_a": 3}');
    assert.equal((await PlacementEpochs.open(file)).epochOf('ses_a'), 0, 'a file of another shape is read as none');
  }));

test('placement epochs: the JSON file of earlier versions is taken in and removed', () =>
  inTempDir(async (dir) => {
    const legacy = path.join(dir, 'placement-epochs.json');
    await writeFile(legacy, JSON.stringify({ ses_a: 4, ses_b: 2 }));
    const epochs = await PlacementEpochs.open(path.join(dir, 'placement-epochs.log'), legacy);
    assert.deepEqual([epochs.epochOf('ses_a'), epochs.epochOf('ses_b')], [4, 2]);
    await assert.rejects(stat(legacy), { code: 'ENOENT' });
    assert.equal((await PlacementEpochs.open(path.join(dir, 'placement-epochs.log'), legacy)).epochOf('ses_a'), 4, 'and the log holds them');
  }));

test('placement epochs: the log stays bounded by its sessions however many starts it records', () =>
  inTempDir(async (dir) => {
    const file = path.join(dir, 'placement-epochs.log');
    const epochs = await PlacementEpochs.open(file);
    for (let epoch = 1; epoch <= 5000; epoch++) epochs.admit({ sessionId: `ses_${epoch % 10}`, epoch });
    const lines = (await readFile(file, 'utf8')).split('\n').filter(Boolean);
    assert.ok(lines.length <= 2 * 10 + 1000 + 1, `${lines.length} lines for 10 sessions`);
    const reopened = await PlacementEpochs.open(file);
    for (let i = 0; i < 10; i++) assert.equal(reopened.epochOf(`ses_${i}`), 4990 + (i === 0 ? 10 : i));
  }));
