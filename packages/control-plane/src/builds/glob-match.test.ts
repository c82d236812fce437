import assert from 'node:assert/strict';
import { test } from 'node:test';
import { globMatches, WorkBudget } from './glob-match.js';

const budget = (): WorkBudget => new WorkBudget(1e9, 'the patterns');

test('globs match as COPY sources do: * and ? within one path segment', () => {
  const cases: [string, string, boolean][] = [
    ['*.txt', 'a.txt', true],
    ['*.txt', 'dir/a.txt', false],
    ['*/a.txt', 'dir/a.txt', true],
    ['src/*', 'src/x.ts', true],
    ['src/*', 'src/sub/x.ts', false],
    ['a?c', 'abc', true],
    ['a?c', 'ac', false],
    ['a*b*c', 'axxbyyc', true],
    ['a*b*c', 'axxbyy', false],
    ['*', '', true],
    ['**', 'anything', true],
    ['***b', 'aaab', true],
    ['*a*a', 'aa', true],
    ['x', 'x', true],
    ['x', 'y', false],
  ];
  for (const [pattern, name, expected] of cases) assert.equal(globMatches(pattern, name, budget()), expected, `${pattern} ~ ${name}`);
});

test('adversarial globs take linear-ish time, not exponential (the probe: 8.8 s for 11 stars, 68 s for 8 on 60 characters)', () => {
  const started = performance.now();
  assert.equal(globMatches('***********b', 'a'.repeat(26), budget()), false);
  assert.equal(globMatches('********b', 'a'.repeat(60), budget()), false);
  assert.equal(globMatches(`${'*a'.repeat(120)}b`, 'a'.repeat(255), budget()), false);
  const elapsed = performance.now() - started;
  assert.ok(elapsed < 200, `took ${elapsed.toFixed(1)} ms`);
});

test('a spent budget refuses the request with a validation error', () => {
  const small = new WorkBudget(1000, 'the COPY sources');
  assert.throws(
    () => {
      for (let i = 0; i < 100; i++) globMatches(`${'*a'.repeat(20)}b`, 'a'.repeat(100), small);
    },
    (err: Error & { code?: string }) => err.code === 'VALIDATION_FAILED' && /too much work/.test(err.message),
  );
});
