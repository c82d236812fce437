import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CommandError, CommandTimeout, runCommand, spawnedCommands } from './run-command.js';
import { Spawner } from './spawner.js';

const binary = fileURLToPath(new URL('../dist-native/space-spawner', import.meta.url));
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
/** The spawner and this process's own children, each named: every behaviour is checked with both. */
const bothRunners = (spawner: Spawner) =>
  [
    ['the spawner', spawner],
    ['this process', spawnedCommands],
  ] as const;
const until = async (check: () => boolean, ms = 5000) => {
  for (const end = Date.now() + ms; !check(); ) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

test('the spawner runs a command as a child of this process would: output, input, exit codes, working directory, environment', async () => {
  const spawner = new Spawner(binary);
  const dir = mkdtempSync(path.join(tmpdir(), 'spawner-'));
  try {
    const cases: [string[], Parameters<Spawner['run']>[1]][] = [
      [['sh', '-c', 'echo out; echo err >&2'], {}],
      [['sh', '-c', 'echo partial; exit 3'], { allowFailure: true }],
      [['tr', 'a-z', 'A-Z'], { input: 'two\nlines\n' }],
      [['pwd'], { cwd: dir }],
      [['sh', '-c', 'echo "$ONLY" "[$HOME]"'], { env: { ONLY: 'this' } }],
      [['sh', '-c', 'kill -9 $$'], { allowFailure: true }],
    ];
    for (const [argv, options] of cases) {
      const [spawned, direct] = [await spawner.run(argv, options), await runCommand(argv, options)];
      assert.deepEqual(spawned, direct, argv.join(' '));
    }
    const failed = await spawner.run(['sh', '-c', 'echo why >&2; exit 2']).catch((err: Error) => err);
    assert.ok(failed instanceof CommandError, 'a non-zero exit without allowFailure is a CommandError');
    assert.equal(failed.result.code, 2);
    assert.match(failed.message, /exited 2: why/);
    assert.deepEqual(await spawner.run(['sh', '-c', 'echo gone'], { stdio: ['ignore', 'ignore', 'ignore'] }), { code: 0, stdout: '', stderr: '' });
    await assert.rejects(spawner.run(['space-no-such-command']), /cannot run space-no-such-command/);
    await assert.rejects(spawner.run(['true'], { cwd: path.join(dir, 'missing') }), /cannot run true/);
  } finally {
    await spawner.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a detached command (runsc under its subreaper) answers when it closes fd 3, runs on in a session of its own, and is reaped', async () => {
  const spawner = new Spawner(binary);
  const dir = mkdtempSync(path.join(tmpdir(), 'spawner-'));
  try {
    for (const [name, runner] of bothRunners(spawner)) {
      const output = path.join(dir, `${name}.log`);
      const script = 'echo out; echo err >&2; echo "$$ $(ps -o sid= -p $$)" >&3; exec 3>&-; sleep 0.3; echo later';
      const status = await runner.startDetached(['sh', '-c', script], output);
      const [pid, sid] = status.trim().split(/\s+/).map(Number);
      assert.equal(sid, pid, `${name}: a session of its own`);
      assert.equal(alive(pid!), true, `${name}: still running after its answer`);
      await until(() => !alive(pid!));
      assert.equal(readFileSync(output, 'utf8'), 'out\nerr\nlater\n', name);
    }
    await assert.rejects(spawner.startDetached(['space-no-such-command'], path.join(dir, 'x.log')), /cannot run space-no-such-command/);
  } finally {
    await spawner.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('commands run at once, and a spawner that died fails only what it was running and starts again', async () => {
  const spawner = new Spawner(binary);
  try {
    const started = Date.now();
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => spawner.run(['sh', '-c', `sleep 0.5; echo ${i}`])));
    assert.deepEqual(
      results.map((r) => r.stdout.trim()),
      Array.from({ length: 10 }, (_, i) => String(i)),
    );
    assert.ok(Date.now() - started < 4000, `10 commands of 0.5 s took ${Date.now() - started} ms: not run at once`);

    const first = spawner.pid!;
    const running = spawner.run(['sleep', '30']);
    process.kill(first, 'SIGKILL');
    await assert.rejects(running, /cannot run sleep: the spawner exited \(SIGKILL\)/);
    assert.equal((await spawner.run(['echo', 'again'])).stdout, 'again\n');
    assert.notEqual(spawner.pid, first);
  } finally {
    await spawner.stop();
  }
});

test('a helper that answers outside the protocol is ended: what it ran fails, nothing waits forever', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'spawner-'));
  const impostor = path.join(dir, 'impostor');
  writeFileSync(impostor, '#!/bin/sh\nread line\necho "not an answer"\nexec sleep 30\n', { mode: 0o755 });
  const spawner = new Spawner(impostor);
  try {
    await assert.rejects(spawner.run(['true']), /cannot run true: the spawner exited \(SIGTERM\)/);
  } finally {
    await spawner.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the spawner ends with its agent: at stop, and when the agent ends without stopping it', async () => {
  const spawner = new Spawner(binary);
  await spawner.run(['true']);
  const pid = spawner.pid!;
  await spawner.stop();
  assert.equal(alive(pid), false, 'stopped');
  // After its stop, commands are still run (spawned by this process).
  assert.equal((await spawner.run(['echo', 'late'])).stdout, 'late\n');

  // A process that runs a command through a spawner and exits without stopping it: it is not held
  // up by the spawner (the script ends by itself), and the spawner ends with it.
  const script = `import { Spawner } from ${JSON.stringify(new URL('./spawner.js', import.meta.url).href)};
    const spawner = new Spawner(${JSON.stringify(binary)});
    await spawner.run(['true']);
    console.log(spawner.pid);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let printed = '';
  child.stdout.on('data', (d: Buffer) => (printed += d));
  const code = await new Promise((resolve) => child.on('close', resolve));
  assert.equal(code, 0);
  const orphan = Number(printed.trim());
  assert.ok(orphan > 0);
  await until(() => !alive(orphan));

  // Stopped while a command runs: the command ends, then the spawner, and the process lives until both have.
  const stopping = `import { Spawner } from ${JSON.stringify(new URL('./spawner.js', import.meta.url).href)};
    const spawner = new Spawner(${JSON.stringify(binary)});
    const running = spawner.run(['sleep', '0.3']);
    await spawner.stop();
    console.log((await running).code);`;
  assert.equal(execFileSync(process.execPath, ['--input-type=module', '-e', stopping], { encoding: 'utf8' }).trim(), '0');
});

test("the spawner runs in a session of its own: a terminal's Ctrl-C reaches only the agent, which still needs it to stop sandboxes", async () => {
  const spawner = new Spawner(binary);
  try {
    await spawner.run(['true']);
    const sid = execFileSync('ps', ['-o', 'sid=', '-p', String(spawner.pid)], { encoding: 'utf8' }).trim();
    assert.equal(Number(sid), spawner.pid);
  } finally {
    await spawner.stop();
  }
});

test('a command past its deadline is killed and rejects with CommandTimeout, whatever allowFailure says; a detached one with its whole session', async () => {
  const spawner = new Spawner(binary);
  const dir = mkdtempSync(path.join(tmpdir(), 'spawner-'));
  try {
    for (const [name, runner] of bothRunners(spawner)) {
      // Like runsc on a sandbox whose Sentry is frozen: it never ends by itself.
      const started = Date.now();
      const hung = await runner.run(['sleep', '60'], { allowFailure: true, timeout: 300 }).catch((err: Error) => err);
      assert.ok(hung instanceof CommandTimeout, `${name}: ${String(hung)}`);
      assert.equal(hung.message, 'sleep 60 did not end within 0.3 s and was killed');
      assert.ok(Date.now() - started < 3000, `${name}: answered ${Date.now() - started} ms after its start`);
      assert.equal((await runner.run(['sh', '-c', 'echo in time'], { timeout: 5000 })).stdout, 'in time\n', `${name}: one that ends in time is answered`);

      // Never closes fd 3; its child in the same session goes with it.
      const pidFile = path.join(dir, `${name}.pid`);
      const script = `sleep 60 & echo $! > '${pidFile}'; sleep 60`;
      const detached = await runner.startDetached(['sh', '-c', script], path.join(dir, `${name}.log`), 300).catch((err: Error) => err);
      assert.ok(detached instanceof CommandTimeout, `${name}, detached: ${String(detached)}`);
      const child = Number(readFileSync(pidFile, 'utf8'));
      await until(() => !alive(child));
    }
  } finally {
    await spawner.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
