import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { clusterPostgresDir } from '@space/cli';
import { freePort } from '@space/server-kit';
import { Api } from './client.js';
import { hostResources } from './host-state.js';
import { cliMain, testDataDir } from './platform.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The `btrfs send` processes of a node whose data directory is `nodeDir`. */
function sendsOf(nodeDir: string): string[] {
  return execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.startsWith('btrfs send') && line.includes(`${nodeDir}/`));
}

/** Resolves with the child's exit code, or null after `ms`. */
function exitOf(child: ChildProcess, ms: number): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), ms);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code ?? 128);
    });
  });
}

test('Ctrl-C on `space cluster up` while a base is being shipped: the node ends its send and stops cleanly, nothing is left on the host', async () => {
  const dataDir = `${testDataDir}-interrupt`;
  const root = path.join(dataDir, 'cluster');
  const nodeDir = path.join(root, 'node-1');
  const adminKey = `interrupt-test-${process.pid}-${Date.now()}`;
  // Its own process group, as a terminal's foreground job: Ctrl-C is a SIGINT to the whole group.
  const child = spawn(process.execPath, [cliMain, 'cluster', 'up', '--nodes', '1', '--control-planes', '1', '--json'], {
    env: {
      ...process.env,
      SPACE_DATA_DIR: dataDir,
      SPACE_PORT: String(await freePort()),
      SPACE_API_KEY: adminKey,
      SPACE_TEMPLATES: 'tiny',
      SPACE_POOL_SIZE: '0',
      SPACE_TEMPLATE_IMAGES: '0',
      SPACE_VOLUME_SIZE_GB: '8',
      SPACE_QUIET: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  try {
    const started = Date.now();
    while (!stdout.includes('\n')) {
      assert.ok(child.exitCode === null, `cluster up exited:\n${stderr.slice(-4000)}`);
      assert.ok(Date.now() - started < 240_000, `cluster up not up within 240 s:\n${stderr.slice(-4000)}`);
      await pause(200);
    }
    const { controlPlanes } = JSON.parse(stdout.split('\n')[0]!) as { controlPlanes: string[] };
    const api = new Api(controlPlanes[0]!, adminKey);
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    const wrote = await api.exec(session.id, ['sh', '-c', 'head -c 400000000 /dev/urandom > /workspace/big && echo ok'], { timeoutMs: 120_000 });
    assert.equal(wrote.stdout, 'ok\n', JSON.stringify(wrote));
    // The session's first checkpoint is shipped in the background, after a base (a full send of it) is made.
    const checkpoint = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, {});
    assert.equal(checkpoint.status, 201, JSON.stringify(checkpoint.body));
    const asked = Date.now();
    while (sendsOf(nodeDir).length === 0) {
      assert.ok(Date.now() - asked < 30_000, 'no btrfs send of the node seen within 30 s of the checkpoint');
      await pause(20);
    }
    process.kill(-child.pid!, 'SIGINT');
    const code = await exitOf(child, 120_000);
    assert.equal(code, 0, `cluster up did not stop cleanly within 120 s:\n${stderr.slice(-4000)}`);
    assert.match(stderr, /\[node-1\] exited \(code 0\)/, 'the node stopped itself');
    assert.doesNotMatch(stderr, /exited \(code [1-9]|Unhandled|unhandled/, stderr.slice(-4000));
    assert.deepEqual(sendsOf(nodeDir), [], 'no btrfs send outlives its node');
    assert.deepEqual(hostResources(nodeDir), { runsc: [], netns: [], mounts: [], loops: [], staged: [] });
    const mounts = readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .filter((l) => l.includes(`${root}/`));
    assert.deepEqual(mounts, []);
  } finally {
    if (child.exitCode === null) {
      process.kill(-child.pid!, 'SIGTERM');
      await exitOf(child, 120_000);
    }
    if (!readFileSync('/proc/self/mounts', 'utf8').includes(`${root}/`)) {
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(clusterPostgresDir(dataDir), { recursive: true, force: true });
    }
  }
});
