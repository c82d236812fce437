import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chunksOf } from './chunks-of.js';

test('lists of at most a size: in order, none empty', () => {
  assert.deepEqual(chunksOf([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
  assert.deepEqual(chunksOf([1, 2, 3, 4], 2), [
    [1, 2],
    [3, 4],
  ]);
  assert.deepEqual(chunksOf([], 500), []);
});
