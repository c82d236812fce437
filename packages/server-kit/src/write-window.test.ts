import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WriteWindow } from './write-window.js';

/** A write the test ends by hand, with what each call got. */
function heldWrites() {
  const calls: { items: number[]; end: (err?: Error) => void }[] = [];
  const write = (items: number[]) =>
    new Promise<string[]>((resolve, reject) => {
      calls.push({ items, end: (err) => (err ? reject(err) : resolve(items.map((i) => `stored ${i}`))) });
    });
  return { calls, write };
}

const tick = (ms = 0) => new Promise((resolve) => setTimeout(resolve, ms));

test('items within the window go in one write, split at the most per write; each gets its own result', async () => {
  const { calls, write } = heldWrites();
  const window = new WriteWindow(write, 20, 2);
  const results = [1, 2, 3].map((i) => window.add(i));
  await tick(40);
  assert.deepEqual(
    calls.map((c) => c.items),
    [[1, 2], [3]],
  );
  for (const c of calls) c.end();
  assert.deepEqual(await Promise.all(results), ['stored 1', 'stored 2', 'stored 3']);
});

test('with one write at once, what comes meanwhile waits for it and goes together in the next; a failed write rejects its items only', async () => {
  const { calls, write } = heldWrites();
  const window = new WriteWindow(write, 5, 100, 1);
  const first = window.add(1);
  await tick(20);
  const later = [2, 3, 4].map((i) => window.add(i));
  await tick(20);
  assert.deepEqual(
    calls.map((c) => c.items),
    [[1]],
    'past its window, still waiting: one write is under way',
  );
  calls[0]!.end(new Error('the database went away'));
  await assert.rejects(first, /went away/);
  await tick();
  assert.deepEqual(
    calls.map((c) => c.items),
    [[1], [2, 3, 4]],
    'written as soon as the first ended',
  );
  calls[1]!.end();
  assert.deepEqual(await Promise.all(later), ['stored 2', 'stored 3', 'stored 4']);
  const next = window.add(5);
  await tick(20);
  assert.equal(calls.length, 3, 'an item after that waits its window, then goes');
  calls[2]!.end();
  assert.equal(await next, 'stored 5');
});
