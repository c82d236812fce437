import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Activity } from './activity.js';

test('uses are recorded in batches: one write for many sessions, each at most once per interval; open calls and a stop flush at once', async () => {
  const clock = { now: 1_000_000 };
  const batches: Array<[string, number][]> = [];
  const activity = new Activity(
    () => clock.now,
    async (uses) => void batches.push([...uses]),
    { recordEveryMs: 5_000, batchDelayMs: 20 },
  );

  for (let i = 0; i < 100; i++) activity.begin(`ses_${i}`)();
  activity.begin('ses_0')();
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.equal(batches.length, 1, 'one write for a hundred sessions');
  assert.equal(batches[0]!.length, 100);
  assert.deepEqual(batches[0]![0], ['ses_0', 1_000_000]);

  clock.now += 1_000;
  activity.begin('ses_1')();
  await activity.flush();
  assert.equal(batches.length, 1, 'used again within the interval: nothing more to write');
  assert.equal(activity.lastUsedAt('ses_1'), 1_001_000, 'though this control plane knows');

  clock.now += 5_000;
  const end = activity.begin('ses_long');
  activity.begin('ses_gone');
  activity.forget('ses_gone');
  await activity.flush();
  assert.deepEqual(batches.at(-1), [['ses_long', 1_006_000]], 'a forgotten session is not written');

  clock.now += 1_000;
  await activity.recordOpenCalls();
  assert.deepEqual(batches.at(-1), [['ses_long', 1_007_000]], 'a call still open is use, written at once');
  end();
  assert.equal(activity.busy('ses_long'), false);
});

test('a failed write fails nothing: later uses are written', async () => {
  let fail = true;
  const written: string[] = [];
  const activity = new Activity(Date.now, async (uses) => {
    if (fail) throw new Error('store away');
    written.push(...uses.keys());
  });
  activity.begin('ses_a')();
  await activity.flush();
  fail = false;
  activity.begin('ses_b')();
  await activity.flush();
  assert.deepEqual(written, ['ses_b']);
});
