import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { collectOutput } from './collect-output.js';
import { ProcessTable } from './process-table.js';
import { SandboxPaths } from './sandbox-paths.js';

// The daemon's process handling, run on the host with real processes.
const workdir = mkdtempSync(path.join(tmpdir(), 'space-daemon-'));
const table = new ProcessTable(new SandboxPaths(workdir), { PATH: process.env.PATH ?? '/usr/bin:/bin' }, '/nonexistent-pty-helper');
test.after(() => rmSync(workdir, { recursive: true, force: true }));

test('buffered output is capped and flagged as truncated', async () => {
  const proc = table.start({ cmd: 'head -c 300000 /dev/zero' });
  proc.endStdin();
  const result = await collectOutput(proc, 100_000);
  assert.equal(result.stdout.length, 100_000);
  assert.equal(result.truncated, true);
  assert.equal(result.exitCode, 0);
});

test('a timeout kills the whole process group', async () => {
  const proc = table.start({ cmd: 'sleep 30 & sleep 30; echo never', timeoutMs: 200 });
  const result = await collectOutput(proc, 1000);
  assert.deepEqual([result.timedOut, result.exitCode, result.stdout], [true, 124, '']);
});

test('re-attaching replays the kept backlog and the exit', async () => {
  const proc = table.start({ cmd: 'echo one; echo two >&2' });
  await collectOutput(proc, 1000);
  const replayed: string[] = [];
  proc.subscribe((e) => replayed.push(e.type === 'exit' ? `exit ${e.exitCode}` : `${e.type} ${e.data.toString().trim()}`), { replay: true });
  assert.deepEqual(replayed.sort(), ['exit 0', 'stderr two', 'stdout one']);
  assert.ok(table.list().some((p) => p.pid === proc.pid && !p.running && p.exitCode === 0));
});

test('re-attaching after an offset replays only what follows it, cut mid-chunk if need be', async () => {
  const proc = table.start({ cmd: 'printf abcdef; sleep 0.1; printf ghij' });
  await collectOutput(proc, 1000);
  const replay = (after: number): string => {
    let out = '';
    proc.subscribe((e) => (out += e.type === 'exit' ? '|exit' : `${e.offset}:${e.data}`), { replay: true, after });
    return out;
  };
  assert.equal(replay(0), '0:abcdef6:ghij|exit');
  assert.equal(replay(3), '3:def6:ghij|exit');
  assert.equal(replay(6), '6:ghij|exit');
  assert.equal(replay(10), '|exit');
});

test('missing executables and unknown pids get typed errors', () => {
  assert.throws(() => table.start({ cmd: ['/definitely/not/here'] }), { code: 'EXEC_FAILED' });
  assert.throws(() => table.get(999_999_999), { code: 'PROCESS_NOT_FOUND' });
  assert.throws(() => new SandboxPaths('/w').resolve('a/../../b'), { code: 'INVALID_PATH' });
  assert.equal(new SandboxPaths('/w').resolve('a/b'), '/w/a/b');
});

test('a sandbox handed to a new session forgets finished processes and keeps running ones', async () => {
  const own = new ProcessTable(new SandboxPaths(workdir), { PATH: process.env.PATH ?? '/usr/bin:/bin' }, '/nonexistent-pty-helper');
  const done = own.start({ cmd: 'true' });
  done.endStdin();
  await collectOutput(done, 1000);
  const running = own.start({ cmd: 'sleep 30' });
  own.forgetFinished();
  assert.deepEqual(
    own.list().map((p) => [p.pid, p.running]),
    [[running.pid, true]],
  );
  running.kill('SIGKILL');
});

test("a cwd that is a file or missing, and arguments spawn cannot pass, are the caller's errors (4xx), not ours", () => {
  writeFileSync(path.join(workdir, 'plain-file'), 'x');
  assert.throws(() => table.start({ cmd: ['true'], cwd: 'plain-file' }), { code: 'NOT_A_DIRECTORY' });
  assert.throws(() => table.start({ cmd: ['true'], cwd: 'no-such-dir' }), { code: 'FILE_NOT_FOUND' });
  // What the protocol's schema refuses first, caught here too for callers that bypass it.
  assert.throws(
    () => table.start({ cmd: [''] }),
    (err: { code?: string; status?: number }) => err.status! < 500,
  );
  assert.throws(
    () => table.start({ cmd: ['echo', 'a\0b'] }),
    (err: { code?: string; status?: number }) => err.status! < 500,
  );
});
