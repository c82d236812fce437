import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { after, beforeEach, describe, test } from 'node:test';
import { openSqliteStore } from '@space/control-plane';
import { Api } from './client.js';
import { hostResources, sandboxHostPid } from './host-state.js';
import { startPlatform, type RunningPlatform } from './platform.js';

/** Host commands on this data directory that a checkpoint runs. */
function orphanCommands(dataDir: string): string[] {
  return execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
    .split('\n')
    .filter((args) => args.includes(dataDir) && (/ checkpoint /.test(args) || /subvolume snapshot/.test(args)));
}

describe('a node agent killed outright restarts into a consistent state', () => {
  let platform: RunningPlatform | null = null;

  // A test that failed midway leaves its platform running; the next one needs the data directory.
  beforeEach(async () => {
    if (platform && platform.process.exitCode === null) await platform.stop();
  });

  after(async () => {
    if (platform && platform.process.exitCode === null) assert.equal(await platform.stop(), 0, platform.output());
    if (platform) {
      const left = hostResources(platform.dataDir);
      assert.deepEqual([left.runsc, left.mounts, left.loops, left.staged], [[], [], [], []]);
    }
  });

  test('SIGKILL of the platform: running sandboxes are adopted, half-done work is cleaned up', { timeout: 180_000 }, async () => {
    const first = await startPlatform();
    const api = new Api(first.url, first.adminKey);
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, egress: { mode: 'deny-all' } });
    await api.exec(session.id, 'echo before-crash > /workspace/f');
    // The gateway answers (its policy: deny-all) before the crash... (busybox wget's -T crashes in gVisor: no timeout flag)
    const probeGateway = async (client: Api): Promise<string> => (await client.exec(session.id, ['sh', '-c', 'wget -O - http://198.18.0.1/ 2>&1'])).stdout;
    const beforeCrash = await probeGateway(api);
    if (!/403 Forbidden/.test(beforeCrash)) {
      await first.stop(); // a failure here must not leave the platform running for the next test
      assert.fail(`the gateway did not answer before the crash: ${beforeCrash}`);
    }
    const { pid } = await api.exec(session.id, 'i=0; while true; do i=$((i+1)); echo $i > /workspace/counter; sleep 0.2; done', { background: true });

    first.process.kill('SIGKILL');
    await new Promise((resolve) => first.process.once('exit', resolve));
    // What a crash in the middle of a checkpoint or a restore leaves: a snapshot the store never
    // recorded, and a restore's staging copy.
    const btrfs = `${first.dataDir}/btrfs`;
    execFileSync('btrfs', ['subvolume', 'snapshot', '-r', `${btrfs}/volumes/${session.id}`, `${btrfs}/checkpoints/ckp_orphan000001`], { stdio: 'ignore' });
    execFileSync('btrfs', ['subvolume', 'snapshot', `${btrfs}/volumes/${session.id}`, `${btrfs}/volumes/${session.id}.restoring`], { stdio: 'ignore' });
    // Two restores racing used to put a second snapshot inside the staging copy: it must not block the start.
    execFileSync('btrfs', ['subvolume', 'snapshot', `${btrfs}/checkpoints/ckp_orphan000001`, `${btrfs}/volumes/${session.id}.restoring/ckp_orphan000001`], {
      stdio: 'ignore',
    });
    // ...and of a full checkpoint: a memory image still being written, and one whose snapshot never came.
    mkdirSync(`${btrfs}/checkpoints/ckp_orphan000002.memory.partial`);
    writeFileSync(`${btrfs}/checkpoints/ckp_orphan000002.memory.partial/checkpoint.img`, 'half');
    mkdirSync(`${btrfs}/checkpoints/ckp_orphan000003.memory`);
    // ...and the session's lease, held by the dead process for an operation it never finished.
    const store = await openSqliteStore(`${first.dataDir}/space.db`);
    await store.acquireSessionLease({ sessionId: session.id, holder: 'local/dead-1', operation: 'checkpoint', expiresAt: Date.now() + 3_600_000 }, Date.now());
    await store.close();

    platform = await startPlatform({ adminKey: first.adminKey });
    const again = new Api(platform.url, platform.adminKey);
    assert.ok(!existsSync(`${btrfs}/checkpoints/ckp_orphan000001`), 'the unrecorded checkpoint is removed');
    assert.ok(!existsSync(`${btrfs}/volumes/${session.id}.restoring`), 'the staging copy is removed');
    assert.ok(!existsSync(`${btrfs}/checkpoints/ckp_orphan000002.memory.partial`), 'the partial memory image is removed');
    assert.ok(!existsSync(`${btrfs}/checkpoints/ckp_orphan000003.memory`), 'the memory image without a snapshot is removed');
    const found = await again.call('GET', `/v1/sessions/${session.id}`);
    assert.equal(found.status, 200);
    // The restarted control plane released the dead one's lease: a lifecycle operation goes through at once.
    const checkpointStarted = Date.now();
    const checkpoint = await again.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' });
    assert.equal(checkpoint.status, 201, JSON.stringify(checkpoint.body));
    assert.ok(Date.now() - checkpointStarted < 10_000, `the checkpoint waited ${Date.now() - checkpointStarted} ms`);
    assert.match(platform.output(), /released 1 session lease\(s\) a previous control plane here held/);
    assert.equal((await again.exec(session.id, 'cat /workspace/f')).stdout, 'before-crash\n');
    // The sandbox survived its node agent and was adopted: its background process still counts.
    const processes = (await again.call('GET', `/v1/sessions/${session.id}/processes`)).body.processes as { pid: number; running: boolean }[];
    assert.ok(
      processes.some((p) => p.pid === pid && p.running),
      JSON.stringify(processes),
    );
    // Polled for up to 5 s: on a loaded machine the adopted loop's 0.2 s sleeps can stretch.
    const before = Number((await again.exec(session.id, 'cat /workspace/counter')).stdout);
    let counted = before;
    for (const deadline = Date.now() + 5000; counted <= before && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 250));
      counted = Number((await again.exec(session.id, 'cat /workspace/counter')).stdout);
    }
    assert.ok(counted > before, `the adopted counter stayed at ${before}`);
    assert.equal((await again.call('GET', `/v1/sessions/${session.id}`)).body.sandbox.id, session.sandbox.id);
    // ...and after: the adopted sandbox's link leads to the new gateway's ports, and the control plane
    // hands the node the session's policy again (lost with the node's memory) once the node's
    // heartbeat (here: its health, read for it by the control plane) names the session.
    let answer = '';
    for (const started = Date.now(); Date.now() - started < 20_000 && !/403 Forbidden/.test(answer); ) {
      answer = await probeGateway(again);
      if (!/403 Forbidden/.test(answer)) await new Promise((r) => setTimeout(r, 1000));
    }
    assert.match(answer, /403 Forbidden/);
    await again.call('DELETE', `/v1/sessions/${session.id}`);
    assert.equal(await platform.stop(), 0, platform.output());
  });

  test('SIGKILL in the middle of a full checkpoint: the session comes back with its files, nothing half-written stays', { timeout: 180_000 }, async () => {
    const first = await startPlatform();
    const api = new Api(first.url, first.adminKey);
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    await api.exec(session.id, 'echo before-crash > /workspace/f');
    await api.exec(session.id, 'i=0; while true; do i=$((i+1)); echo $i > /workspace/counter; sleep 0.2; done', { background: true });
    const btrfs = `${first.dataDir}/btrfs`;
    const before = new Set(readdirSync(`${btrfs}/checkpoints`));
    const inFlight = api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' }).catch(() => null);
    await new Promise((r) => setTimeout(r, 500));
    first.process.kill('SIGKILL');
    await new Promise((resolve) => first.process.once('exit', resolve));
    await inFlight;
    // Commands the killed agent had started (runsc checkpoint, btrfs snapshot) run to their end on
    // their own; the periodic sweeps handle what they write late, here they are waited for.
    for (let i = 0; i < 300 && orphanCommands(first.dataDir).length > 0; i++) await new Promise((r) => setTimeout(r, 100));

    platform = await startPlatform({ adminKey: first.adminKey });
    const again = new Api(platform.url, platform.adminKey);
    const left = readdirSync(`${btrfs}/checkpoints`);
    assert.ok(!left.some((n) => n.endsWith('.partial')), `no partial image: ${left.join(' ')}`);
    const listed = (await again.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints as { id: string; kind: string }[];
    for (const c of listed) {
      assert.ok(existsSync(`${btrfs}/checkpoints/${c.id}`), `listed checkpoint ${c.id} exists`);
      if (c.kind === 'full') assert.ok(existsSync(`${btrfs}/checkpoints/${c.id}.memory`), `full checkpoint ${c.id} has its memory image`);
    }
    for (const name of left.filter((n) => /^ckp_[a-z0-9]+$/.test(n) && !before.has(n)))
      assert.ok(
        listed.some((c) => c.id === name),
        `${name} on disk is recorded`,
      );
    assert.equal((await again.exec(session.id, 'cat /workspace/f')).stdout, 'before-crash\n');
    await again.call('DELETE', `/v1/sessions/${session.id}`);
    assert.equal(await platform.stop(), 0, platform.output());
  });

  test('a sandbox that died with its platform: after the restart its session is stopped, not left running for ever', { timeout: 180_000 }, async () => {
    const first = await startPlatform();
    const api = new Api(first.url, first.adminKey);
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 1, idleTimeoutSec: 0 });
    await api.exec(session.id, 'echo kept > /workspace/f');
    first.process.kill('SIGKILL');
    await new Promise((resolve) => first.process.once('exit', resolve));
    process.kill(sandboxHostPid(first.dataDir, session.sandbox.id), 'SIGKILL');

    platform = await startPlatform({ adminKey: first.adminKey, env: { SPACE_MAINTENANCE_TICK_MS: '200' } });
    const again = new Api(platform.url, platform.adminKey);
    // Reconciled before the first call is served.
    const found = (await again.call('GET', `/v1/sessions/${session.id}`)).body;
    assert.equal(found.status, 'stopped', JSON.stringify(found));
    assert.equal(found.sandbox, null);
    assert.equal(found.sandboxHistory.at(-1).endReason, 'lost');
    // Nothing acts on the gone sandbox: no automatic checkpoints pile up while the session is untouched.
    const count = async (): Promise<number> => (await again.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints.length;
    const before = await count();
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(await count(), before);
    assert.doesNotMatch(platform.output(), new RegExp(`maintenance of ${session.id}`));
    // The next call resumes it, with its files.
    assert.equal((await again.exec(session.id, 'cat /workspace/f')).stdout, 'kept\n');
    await again.call('DELETE', `/v1/sessions/${session.id}`);
  });
});
