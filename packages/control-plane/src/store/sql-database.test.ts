import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chunksOf } from './sql-database.js';

test('lists for statements: in order, each at most the size, none empty', () => {
  assert.deepEqual(chunksOf([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
  assert.deepEqual(chunksOf([1, 2, 3, 4], 2), [
    [1, 2],
    [3, 4],
  ]);
  assert.deepEqual(chunksOf([], 500), []);
});
