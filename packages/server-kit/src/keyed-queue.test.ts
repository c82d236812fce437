import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KeyedQueue } from './keyed-queue.js';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('tasks of one key run one at a time in arrival order; other keys run alongside', async () => {
  const queue = new KeyedQueue();
  const events: string[] = [];
  const task = (name: string, ms: number) => async () => {
    events.push(`${name} start`);
    await pause(ms);
    events.push(`${name} end`);
    return name;
  };
  const results = await Promise.all([
    queue.run('a', task('a1', 30)),
    queue.run('a', task('a2', 5)),
    queue.run('b', task('b1', 5)),
    queue.run('a', task('a3', 1)),
  ]);
  assert.deepEqual(results, ['a1', 'a2', 'b1', 'a3']);
  const ofA = events.filter((e) => e.startsWith('a'));
  assert.deepEqual(ofA, ['a1 start', 'a1 end', 'a2 start', 'a2 end', 'a3 start', 'a3 end']);
  assert.ok(events.indexOf('b1 end') < events.indexOf('a1 end'), 'b ran while a1 was running');
  assert.equal(queue.busy('a'), false);
});

test('a failing task does not break the queue; a waiter that times out does not run, and the next one still waits its turn', async () => {
  const queue = new KeyedQueue();
  await assert.rejects(
    queue.run('k', async () => {
      throw new Error('boom');
    }),
    /boom/,
  );
  let slowDone = false;
  const slow = queue.run('k', async () => {
    await pause(80);
    slowDone = true;
  });
  let ranImpatient = false;
  await assert.rejects(
    queue.run('k', async () => void (ranImpatient = true), { ms: 10, timedOut: () => new Error('busy') }),
    /busy/,
  );
  assert.equal(ranImpatient, false);
  // Queued after the one that gave up: it must still wait for the slow task.
  await queue.run('k', async () => assert.equal(slowDone, true));
  await slow;
  await queue.drained('k');
  assert.equal(queue.busy('k'), false);
});
