import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { readLimitHit } from './cgroup-usage.js';

test('limit hit: an OOM kill or a refused fork counted by the sandbox cgroup, v1 and v2', (t) => {
  const root = mkdtempSync(path.join(tmpdir(), 'space-cgroup-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  };
  write('memory/space/sbx_v1/memory.oom_control', 'oom_kill_disable 0\nunder_oom 0\noom_kill 0\n');
  write('pids/space/sbx_v1/pids.events', 'max 0\n');
  write('space/sbx_v2/memory.events', 'low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n');
  write('space/sbx_v2/pids.events', 'max 0\n');
  return (async () => {
    assert.equal(await readLimitHit('sbx_v1', root), null);
    write('pids/space/sbx_v1/pids.events', 'max 12\n');
    assert.equal(await readLimitHit('sbx_v1', root), 'pids');
    write('memory/space/sbx_v1/memory.oom_control', 'oom_kill_disable 0\nunder_oom 0\noom_kill 1\n');
    assert.equal(await readLimitHit('sbx_v1', root), 'oom', 'memory first: an OOM kill is what killed it');
    assert.equal(await readLimitHit('sbx_v2', root), 'oom');
    assert.equal(await readLimitHit('sbx_gone', root), null);
  })();
});
