import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isIgnored, parseDockerignore } from './dockerignore.js';

test(".dockerignore: Docker's patterns, directories with what is in them, exceptions, the last match wins", () => {
  const rules = parseDockerignore(
    ['# build output', 'node_modules', '/dist/', '*.log', '**/__pycache__', 'docs/*.md', '!docs/README.md', 'tmp?', 'data/[ab]*', '.venv/**', ''].join('\n'),
  );
  const cases: [string, boolean][] = [
    ['node_modules', true],
    ['node_modules/left-pad/index.js', true],
    ['src/node_modules/x.js', false], // a pattern is anchored at the context's root
    ['dist/app.js', true],
    ['app.log', true],
    ['logs/app.log', false], // `*` does not cross a `/`
    ['pkg/__pycache__/m.pyc', true],
    ['__pycache__/m.pyc', true], // `**` may be no segment at all
    ['docs/guide.md', true],
    ['docs/README.md', false],
    ['tmp1/x', true],
    ['tmp12/x', false],
    ['data/alpha.csv', true],
    ['data/carrot.csv', false],
    ['.venv/bin/python', true],
    ['src/main.py', false],
    ['Dockerfile', false],
  ];
  assert.deepEqual(
    cases.map(([p]) => [p, isIgnored(rules, p)]),
    cases,
  );
  assert.equal(rules.hasExceptions, true);
  assert.equal(parseDockerignore('# nothing\n\n').patterns.length, 0);
});
