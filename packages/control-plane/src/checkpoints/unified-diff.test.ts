import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { lineEdits, unifiedDiff } from './unified-diff.js';

/** GNU patch as the judge: the diff applied to `before` must give `after`; and GNU diff's own hunks where the change is unambiguous. */
function applies(before: string, after: string, t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-udiff-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const diff = unifiedDiff('/f.txt', before, after, 1000);
  assert.ok(diff !== null);
  writeFileSync(path.join(dir, 'f.txt'), before);
  writeFileSync(path.join(dir, 'f.diff'), diff);
  if (diff !== '') execFileSync('patch', ['-s', '-u', path.join(dir, 'f.txt'), path.join(dir, 'f.diff')]);
  assert.equal(readFileSync(path.join(dir, 'f.txt'), 'utf8'), after);
  return diff;
}

const lines = (n: number, f: (i: number) => string = (i) => `line ${i}`) => Array.from({ length: n }, (_, i) => `${f(i + 1)}\n`).join('');

test('a unified diff that GNU patch applies, with the hunks GNU diff writes', (t) => {
  const before = lines(30);
  const after = before.replace('line 5\n', 'line five\n').replace('line 20\n', '').replace('line 30\n', 'line 30\nline 31\n');
  const diff = applies(before, after, t);
  const dir = mkdtempSync(path.join(tmpdir(), 'space-udiff-gnu-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'a'), before);
  writeFileSync(path.join(dir, 'b'), after);
  const gnu = spawnSync('diff', ['-u', path.join(dir, 'a'), path.join(dir, 'b')], { encoding: 'utf8' }).stdout;
  const hunks = (text: string) => text.slice(text.indexOf('@@'));
  assert.equal(hunks(diff), hunks(gnu));
  assert.ok(diff.startsWith('--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n'), diff);

  assert.equal(applies(before, before, t), '', 'the same text: no diff');
  applies('', lines(3), t);
  applies(lines(3), '', t);
  applies(
    lines(200),
    lines(200, (i) => (i % 7 === 0 ? `changed ${i}` : `line ${i}`)),
    t,
  );
});

test('past the bound of edits, no diff is made (the files differ too much to show)', () => {
  const a = Array.from({ length: 100 }, (_, i) => `a${i}`);
  const b = Array.from({ length: 100 }, (_, i) => `b${i}`);
  assert.equal(lineEdits(a, b, 50), null);
  assert.equal(lineEdits(a, b, 200)?.length, 200);
  assert.equal(unifiedDiff('/x', a.join('\n'), b.join('\n'), 50), null);
});
