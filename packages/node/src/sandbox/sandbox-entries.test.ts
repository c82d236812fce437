import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SandboxEntries } from './sandbox-entries.js';

test('a sandbox is quiet after a checkpoint only when nothing was under way or came in since its mark, until the next entry', () => {
  const entries = new SandboxEntries();
  assert.equal(entries.quietSince(), null, 'not before any checkpoint');
  const mark = entries.mark()!;
  entries.quietAfter('ckp_a', mark);
  assert.equal(entries.quietSince(), 'ckp_a');
  const leave = entries.enter();
  assert.equal(entries.quietSince(), null, 'an entry ends it');
  assert.equal(entries.mark(), null, 'no mark while a call is under way');
  leave();
  leave();
  const next = entries.mark();
  assert.notEqual(next, null, 'leaving twice counts once');
  entries.enter()();
  entries.quietAfter('ckp_b', next!);
  assert.equal(entries.quietSince(), null, 'something came in between the mark and the checkpoint');
});

test('a call open across a checkpoint keeps the sandbox from being quiet after it', () => {
  const entries = new SandboxEntries();
  const mark = entries.mark()!;
  const leave = entries.enter();
  entries.quietAfter('ckp_a', mark);
  leave();
  assert.equal(entries.quietSince(), null);
});
