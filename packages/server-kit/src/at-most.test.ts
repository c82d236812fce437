import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eachAtMost } from './at-most.js';

test('eachAtMost runs every item once, never more than the limit at once', async () => {
  const seen: number[] = [];
  let running = 0;
  let most = 0;
  await eachAtMost([...Array(25).keys()], 4, async (item, index) => {
    assert.equal(item, index);
    running++;
    most = Math.max(most, running);
    await new Promise((resolve) => setTimeout(resolve, item % 3));
    seen.push(item);
    running--;
  });
  assert.deepEqual(
    [...seen].sort((a, b) => a - b),
    [...Array(25).keys()],
  );
  assert.equal(most, 4);
  await eachAtMost([], 4, async () => assert.fail('no item, no call'));
});
