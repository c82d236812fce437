import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { cgroupVersion, readLimitHit, readWorkingSet } from './cgroup-usage.js';

/** A cgroup tree of files under a temporary root, removed after the test. */
function fakeCgroups(t: { after: (fn: () => void) => void }): { root: string; write: (file: string, text: string) => void } {
  const root = mkdtempSync(path.join(tmpdir(), 'space-cgroup-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  };
  return { root, write };
}

test('limit hit: an OOM kill or a refused fork counted by the sandbox cgroup, v1 and v2', (t) => {
  const { root, write } = fakeCgroups(t);
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

test('working set: usage less inactive file pages, v1 and v2; below the threshold asked for, the usage alone (memory.stat not read)', (t) => {
  const { root, write } = fakeCgroups(t);
  write('memory/space/sbx_v1/memory.usage_in_bytes', '1000\n');
  write('memory/space/sbx_v1/memory.stat', 'cache 500\ntotal_inactive_file 300\n');
  write('space/sbx_v2/memory.current', '4000\n');
  write('space/sbx_v2/memory.stat', 'anon 3000\ninactive_file 1000\n');
  assert.equal(cgroupVersion(root), 1);
  assert.equal(readWorkingSet('sbx_v1', 0, 1, root), 700);
  assert.equal(readWorkingSet('sbx_v2', 0, 1, root), null, 'a v1 host reads v1 files only');
  write('cgroup.controllers', 'cpu memory pids\n');
  assert.equal(cgroupVersion(root), 2);
  assert.equal(readWorkingSet('sbx_v2', 0, 2, root), 3000);
  assert.equal(readWorkingSet('sbx_v2', 3500, 2, root), 3000, 'at or above the threshold: memory.stat read');
  // Below it, memory.stat is not read: one the kernel could not build would change nothing.
  rmSync(path.join(root, 'space/sbx_v2/memory.stat'));
  assert.equal(readWorkingSet('sbx_v2', 5000, 2, root), 4000);
  assert.equal(readWorkingSet('sbx_gone', 0, 2, root), null);
});
