import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PoolDemand } from './pool-demand.js';

function clocked(windowMs: number, memoryMs: number) {
  let now = 0;
  const demand = new PoolDemand(windowMs, memoryMs, () => now);
  return { demand, at: (ms: number) => (now = ms) };
}

test('a burst counts in full for its window, then fades out linearly over the memory', () => {
  const { demand, at } = clocked(60_000, 600_000);
  for (let i = 0; i < 100; i++) {
    at(i * 100); // 100 takes over 10 s
    demand.record('base');
  }
  assert.equal(demand.burst('base'), 100);
  at(9_900 + 60_000);
  assert.equal(demand.burst('base'), 100, 'a minute after its last take');
  at(9_900 + 60_000 + 270_000);
  assert.equal(demand.burst('base'), 50, 'half way through the fading');
  at(9_900 + 600_000);
  assert.equal(demand.burst('base'), 0, 'forgotten');
  assert.equal(demand.burst('other'), 0);
});

test('demand spread out is not a burst: the most within any one window counts', () => {
  const { demand, at } = clocked(60_000, 600_000);
  for (let i = 0; i < 10; i++) {
    at(i * 61_000);
    demand.record('base');
  }
  assert.equal(demand.burst('base'), 1);
  at(10 * 61_000);
  for (let i = 0; i < 3; i++) demand.record('base');
  assert.equal(demand.burst('base'), 3, 'three at once; the take 61 s before them is outside their window');
});

test('with no memory beyond the window, demand is what came within the window', () => {
  const { demand, at } = clocked(300, 0);
  for (let i = 0; i < 4; i++) demand.record('base');
  at(299);
  assert.equal(demand.burst('base'), 4);
  at(300);
  assert.equal(demand.burst('base'), 0);
});
