import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BuildContext } from './build-context.js';
import { parseDockerfile } from './dockerfile.js';

function copyStep(dockerfile: string) {
  const step = parseDockerfile(`FROM base\n${dockerfile}`)[1]!;
  if (step.kind !== 'COPY' && step.kind !== 'ADD') throw new Error('not a COPY');
  return step;
}

const file = Buffer.from('x').toString('base64');

test('COPY sources name files, directories, globs and the whole context', () => {
  const context = BuildContext.from({ 'a.txt': file, 'src/x.ts': file, 'src/sub/y.ts': file, 'b.md': file }, [], 1 << 20);
  const targets = (line: string) =>
    context
      .copies(copyStep(line), '/app', {})
      .map((c) => c.target)
      .sort();
  assert.deepEqual(targets('COPY a.txt /app/'), ['/app/a.txt']);
  assert.deepEqual(targets('COPY a.txt renamed.txt'), ['/app/renamed.txt']);
  assert.deepEqual(targets('COPY ./src/// /opt/'), ['/opt/sub/y.ts', '/opt/x.ts']);
  assert.deepEqual(targets('COPY *.txt *.md /d/'), ['/d/a.txt', '/d/b.md']);
  assert.deepEqual(targets('COPY src/*.ts /d/'), ['/d/x.ts']);
  assert.deepEqual(targets('COPY . /all/'), ['/all/a.txt', '/all/b.md', '/all/src/sub/y.ts', '/all/src/x.ts']);
  assert.throws(() => context.check(copyStep('COPY nothing* /d/')), /not in the build context/);
  for (const outside of ['..', '../a.txt', 'src/../../a.txt', 'src/..', '/etc/passwd'])
    assert.throws(() => context.check(copyStep(`COPY ${outside} /d/`)), /outside the build context/, outside);
  const dotted = BuildContext.from({ 'a..b': file, '..c': file }, [], 1 << 20);
  assert.deepEqual(
    dotted.copies(copyStep('COPY a..b ..c /d/'), '/', {}).map((c) => c.target),
    ['/d/a..b', '/d/..c'],
    'dots inside a name are no parent',
  );
});

test('the probe request is refused at once, and no mix of sources and files holds the event loop', () => {
  const probe = BuildContext.from({ aaaaaaaaaaaaaaaaaaaaaaaaaa: file }, [], 1 << 20);
  let started = performance.now();
  assert.throws(() => probe.check(copyStep('COPY ***********b /x')), /not in the build context/);
  assert.ok(performance.now() - started < 100, `the probe took ${(performance.now() - started).toFixed(1)} ms`);

  // 10,000 files of 255 a's (the largest context) and 400 distinct adversarial globs: refused by the budget.
  const files: Record<string, string> = {};
  for (let i = 0; i < 10_000; i++) files[`${'a'.repeat(250)}${String(i).padStart(5, '0')}`] = file;
  const big = BuildContext.from(files, [], 64 << 20);
  const sources = Array.from({ length: 400 }, (_, i) => `*${'a'.repeat(100 + (i % 100))}${'?'.repeat(i % 7)}b`);
  started = performance.now();
  assert.throws(() => big.check(copyStep(`COPY ${sources.join(' ')} /x/`)), /too much work/);
  const elapsed = performance.now() - started;
  assert.ok(elapsed < 1000, `refused after ${elapsed.toFixed(1)} ms`);
});
