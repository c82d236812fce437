import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { CgroupMemoryReader, cgroupVersion, readLimitHit } from './cgroup-usage.js';

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
  assert.equal(readLimitHit('sbx_v1', root), null);
  write('pids/space/sbx_v1/pids.events', 'max 12\n');
  assert.equal(readLimitHit('sbx_v1', root), 'pids');
  write('memory/space/sbx_v1/memory.oom_control', 'oom_kill_disable 0\nunder_oom 0\noom_kill 1\n');
  assert.equal(readLimitHit('sbx_v1', root), 'oom', 'memory first: an OOM kill is what killed it');
  assert.equal(readLimitHit('sbx_v2', root), 'oom');
  assert.equal(readLimitHit('sbx_gone', root), null);
});

test('working set: usage less inactive file pages, v1 and v2; below the threshold asked for, the usage alone (memory.stat not read)', (t) => {
  const { root, write } = fakeCgroups(t);
  write('memory/space/sbx_v1/memory.usage_in_bytes', '1000\n');
  write('memory/space/sbx_v1/memory.stat', 'cache 500\ntotal_inactive_file 300\n');
  write('space/sbx_v2/memory.current', '4000\n');
  write('space/sbx_v2/memory.stat', 'anon 3000\ninactive_file 1000\n');
  assert.equal(cgroupVersion(root), 1);
  const v1 = new CgroupMemoryReader(1, root);
  t.after(() => v1.closeAll());
  assert.equal(v1.workingSet('sbx_v1', 0), 700);
  assert.equal(v1.workingSet('sbx_v2', 0), null, 'a v1 host reads v1 files only');
  write('cgroup.controllers', 'cpu memory pids\n');
  assert.equal(cgroupVersion(root), 2);
  const v2 = new CgroupMemoryReader(2, root);
  t.after(() => v2.closeAll());
  assert.equal(v2.workingSet('sbx_v2', 0), 3000);
  assert.equal(v2.workingSet('sbx_v2', 3500), 3000, 'at or above the threshold: memory.stat read');
  // Below it, memory.stat is not read: one the kernel could not build would change nothing.
  rmSync(path.join(root, 'space/sbx_v2/memory.stat'));
  assert.equal(v2.workingSet('sbx_v2', 5000), 4000);
  write('space/sbx_v2/memory.current', '4500\n');
  assert.equal(v2.workingSet('sbx_v2', 5000), 4500, 'the open file read again');
  assert.equal(v2.workingSet('sbx_gone', 0), null);
});

test("a real cgroup's usage read again in place; once the cgroup is removed, null, and read anew when it is back", {
  skip: !existsSync('/sys/fs/cgroup/memory') && 'no cgroup v1 memory controller',
}, (t) => {
  // The host's own hierarchy (v1 here), under the parent the node's sandboxes use; only this child is made and removed.
  const sandboxId = `sbx_test${process.pid}`;
  const dir = path.join('/sys/fs/cgroup/memory/space', sandboxId);
  mkdirSync(dir, { recursive: true });
  t.after(() => existsSync(dir) && rmdirSync(dir));
  const reader = new CgroupMemoryReader(1);
  t.after(() => reader.closeAll());
  const first = reader.workingSet(sandboxId, Number.POSITIVE_INFINITY);
  assert.equal(typeof first, 'number');
  assert.equal(reader.workingSet(sandboxId, Number.POSITIVE_INFINITY), first, 'an empty cgroup uses what it did');
  rmdirSync(dir);
  assert.equal(reader.workingSet(sandboxId, Number.POSITIVE_INFINITY), null, 'the open file of a removed cgroup fails its read');
  mkdirSync(dir);
  assert.equal(reader.workingSet(sandboxId, Number.POSITIVE_INFINITY), 0, 'a new cgroup of that name is opened anew');
  reader.retain(new Set());
});
