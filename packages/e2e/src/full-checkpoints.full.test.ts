import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import type { Api } from './client.js';
import { imageStagingDir } from './host-state.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * A shell loop counting in a variable (memory only); it also writes the value so tests can read it,
 * through a rename: a checkpoint can catch `echo $i > /tmp/count` between truncating the file and
 * writing it, and a read right after the restore then sees an empty file (seen once in CI: "0 after 8").
 */
const counter = 'i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done';

describe('full checkpoints: memory and processes', () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];
  const created = async (body: Record<string, unknown> = {}): Promise<any> => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0, ...body });
    sessions.push(session.id);
    return session;
  };
  const count = async (sessionId: string): Promise<number> => Number((await api.exec(sessionId, ['cat', '/tmp/count'])).stdout);
  /**
   * Whether the counter goes past `from` within 5 s. A restored sandbox sometimes needs a moment
   * before its sleeping processes run again (seen: over 500 ms, about one run in ten); a process that
   * did not survive never advances.
   */
  const advances = async (sessionId: string, from: number): Promise<boolean> => {
    const deadline = Date.now() + 5000;
    do {
      await sleep(200);
      if ((await count(sessionId)) > from) return true;
    } while (Date.now() < deadline);
    return false;
  };
  const startCounter = async (sessionId: string): Promise<number> => {
    const started = await api.exec(sessionId, ['sh', '-c', counter], { background: true });
    while ((await api.exec(sessionId, 'test -s /tmp/count')).exitCode !== 0) await sleep(100);
    return started.pid;
  };
  const fullCheckpoint = async (sessionId: string): Promise<any> => {
    const reply = await api.call('POST', `/v1/sessions/${sessionId}/checkpoints`, { kind: 'full' });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    return reply.body;
  };
  const running = async (sessionId: string, pid: number): Promise<boolean> =>
    (await api.call('GET', `/v1/sessions/${sessionId}/processes`)).body.processes.some((p: any) => p.pid === pid && p.running);

  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)));

  test('a full checkpoint saves memory and the sandbox runs on; after a kill the counter continues from it', { timeout: 180_000 }, async () => {
    const session = await created();
    const pid = await startCounter(session.id);
    const checkpoint = await fullCheckpoint(session.id);
    assert.deepEqual([checkpoint.kind, checkpoint.trigger], ['full', 'manual']);
    assert.ok(checkpoint.sizeBytes > 0 && checkpoint.pauseMs > 0, JSON.stringify(checkpoint));
    const image = path.join(platform.dataDir, 'btrfs', 'checkpoints', `${checkpoint.id}.memory`);
    assert.ok(existsSync(image), 'the memory image sits next to the snapshot');
    assert.equal(statSync(image).mode & 0o777, 0o700, 'the memory image is readable by root only');
    for (const f of readdirSync(image)) assert.equal(statSync(path.join(image, f)).mode & 0o777, 0o600, f);
    assert.ok(!readdirSync(path.join(platform.dataDir, 'btrfs', 'checkpoints')).some((n) => n.endsWith('.partial')), 'nothing half-written is left');
    assert.deepEqual(readdirSync(imageStagingDir(platform.dataDir)), [], 'the image was staged in host memory and moved to the volume');

    // The same sandbox keeps serving and its process keeps counting.
    const sandboxAfter = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandbox.id;
    assert.equal(sandboxAfter, session.sandbox.id);
    const atCheckpoint = await count(session.id);
    assert.ok(await advances(session.id, atCheckpoint), 'the counter runs on after the checkpoint');
    assert.ok(await running(session.id, pid));

    // The sandbox dies; the next call restores it from the memory image: the loop continues.
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    const resumed = await count(session.id);
    assert.ok(resumed >= 1, `counter after resume: ${resumed}`);
    assert.ok(await advances(session.id, resumed), 'the restored process is counting again');
    assert.ok(await running(session.id, pid), 'the same pid runs in the restored sandbox');
    const after = (await api.call('GET', `/v1/sessions/${session.id}`)).body;
    assert.equal(after.sandboxHistory.at(-1).restoredFrom, checkpoint.id);
    // What the volume held before the resume is kept as an fs checkpoint (never pruned), and the history says where.
    const kept = (await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints.at(-1);
    assert.deepEqual([kept.kind, kept.trigger], ['fs', 'resume']);
    assert.equal(
      after.sandboxHistory.at(-1).note,
      `went back to ${checkpoint.id} of ${checkpoint.createdAt} to restore its processes; the files written after it are kept in ${after.checkpoints.at(-1).id}`,
    );
    // A sandbox restored from an image is checkpointed again, as often as asked, and keeps running:
    // images of images restore (the kill below brings back the newest).
    const second = await fullCheckpoint(session.id);
    const third = await fullCheckpoint(session.id);
    assert.equal((await api.call('GET', `/v1/sessions/${session.id}`)).body.sandbox.id, after.sandbox.id, 'the same sandbox ran on through both');
    const atThird = await count(session.id);
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    const fromThird = await count(session.id);
    assert.ok(fromThird >= atThird - 1, `restored from the third image: ${fromThird} after ${atThird}`);
    assert.ok(await advances(session.id, fromThird), 'the process restored from an image of an image counts on');
    assert.equal((await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory.at(-1).restoredFrom, third.id);
    assert.notEqual(second.id, third.id);
  });

  test('a full checkpoint waits for calls in flight instead of cutting them; one that outlasts the wait is refused (fs instead) and the call still ends well', {
    timeout: 120_000,
  }, async () => {
    const session = await created();
    const short = api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: 'sleep 2; echo done' });
    await sleep(300);
    const waited = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
    assert.equal(waited.status, 201, JSON.stringify(waited.body));
    assert.equal(waited.body.kind, 'full');
    assert.deepEqual([(await short).status, (await short).body.stdout], [200, 'done\n']);

    const long = api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: 'sleep 8; echo done' });
    await sleep(300);
    const refused = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
    assert.equal(refused.body.error?.code, 'FULL_CHECKPOINT_REFUSED', JSON.stringify(refused.body));
    assert.match(refused.body.error.message, /did not end within 5 s/);
    assert.ok(refused.body.error.details.fallbackCheckpointId, 'the files were saved in an fs checkpoint');
    assert.deepEqual([(await long).status, (await long).body.stdout], [200, 'done\n']);
  });

  test('files and memory of a full checkpoint match: the sandbox is paused while both are saved', { timeout: 120_000 }, async () => {
    const session = await created();
    // Appends (and syncs, so the host holds it at once) a line every 10 ms, its count kept in the
    // shell's memory: restored from the checkpoint, it continues from the count the checkpoint's
    // memory holds, which must match the file's lines. (Seen failing with the snapshot taken 50 ms
    // after the sandbox ran on: "line 32 is 26".)
    const started = await api.call('POST', `/v1/sessions/${session.id}/exec`, {
      cmd: 'i=0; while true; do i=$((i+1)); echo $i >> /workspace/lines; sync; sleep 0.01; done',
      background: true,
    });
    assert.equal(started.status, 200);
    await sleep(500);
    const checkpoint = await fullCheckpoint(session.id);
    await sleep(300);
    const restored = await api.call('POST', `/v1/sessions/${session.id}/restore`, { checkpointId: checkpoint.id });
    assert.equal(restored.status, 200, JSON.stringify(restored.body));
    // Consecutive from 1, no gap and no number twice: a snapshot taken after the sandbox ran on
    // would hold lines the restored memory writes again.
    await sleep(300);
    const lines: number[] = (await api.exec(session.id, 'cat /workspace/lines')).stdout.trim().split('\n').map(Number);
    lines.forEach((n, i) => assert.equal(n, i + 1, `line ${i + 1} is ${n}: files and memory diverged`));
  });

  test('onResume "files": a resume boots on the newest files, the checkpoint\'s processes are not restored, and the history says so', {
    timeout: 120_000,
  }, async () => {
    const session = await created({ onResume: 'files' });
    assert.equal(session.onResume, 'files');
    const pid = await startCounter(session.id);
    const checkpoint = await fullCheckpoint(session.id);
    await api.exec(session.id, 'echo after-the-checkpoint > /workspace/newer');
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    assert.equal((await api.exec(session.id, 'cat /workspace/newer')).stdout, 'after-the-checkpoint\n', 'the newest files');
    assert.equal(await running(session.id, pid), false, 'no process of the checkpoint');
    const after = (await api.call('GET', `/v1/sessions/${session.id}`)).body;
    assert.deepEqual(
      [after.sandboxHistory.at(-1).restoredFrom, after.sandboxHistory.at(-1).note],
      [null, `booted on the newest files (onResume: files); the processes of ${checkpoint.id} were not restored`],
    );

    // With nothing written since the newest full checkpoint, nothing is lost by restoring it: it is.
    const second = await fullCheckpoint(session.id);
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    await api.exec(session.id, 'true');
    const last = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory.at(-1);
    assert.deepEqual([last.restoredFrom, last.note], [second.id, null]);
  });

  test('upgrade: a memory image saved by another agent build or runsc version is never restored; the resume boots on its files and says so', {
    timeout: 120_000,
  }, async () => {
    const session = await created();
    const pid = await startCounter(session.id);
    await api.exec(session.id, 'echo kept > /workspace/before-upgrade');
    const checkpoint = await fullCheckpoint(session.id);
    // What an upgrade leaves: the image names the runtime directory (agent build and runsc version)
    // it was saved under, and the node now runs another one.
    const metaFile = path.join(platform.dataDir, 'btrfs', 'checkpoints', `${checkpoint.id}.memory`, 'space-meta.json');
    const meta = JSON.parse(readFileSync(metaFile, 'utf8'));
    writeFileSync(metaFile, JSON.stringify({ ...meta, runtimeDir: path.join(path.dirname(meta.runtimeDir), 'saved-by-runsc-20221219') }), { mode: 0o600 });

    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    assert.equal((await api.exec(session.id, 'cat /workspace/before-upgrade')).stdout, 'kept\n');
    assert.equal(await running(session.id, pid), false, 'the old image was not restored');
    const last = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory.at(-1);
    assert.equal(last.restoredFrom, null);
    assert.match(last.note, new RegExp(`memory image of ${checkpoint.id} was saved by another agent build or runsc version`));
  });

  test('fork 2 from a full checkpoint: each fork continues the process and diverges on its own', { timeout: 180_000 }, async () => {
    const parent = await created();
    await startCounter(parent.id);
    await api.exec(parent.id, 'echo parent > /workspace/who');
    const parentIdentity = (await api.exec(parent.id, 'hostname; cat /etc/machine-id')).stdout;
    const checkpoint = await fullCheckpoint(parent.id);
    const fork = await api.call('POST', `/v1/checkpoints/${checkpoint.id}/fork`, { count: 2 });
    assert.equal(fork.status, 201, JSON.stringify(fork.body));
    const forks = fork.body.sessions as any[];
    sessions.push(...forks.map((f) => f.id));
    for (const [i, f] of forks.entries()) {
      assert.equal(f.sandboxHistory[0].restoredFrom, checkpoint.id);
      assert.equal((await api.exec(f.id, 'cat /workspace/who')).stdout, 'parent\n');
      assert.equal((await api.exec(f.id, 'echo $SPACE_SESSION_ID')).stdout, `${f.id}\n`, 'a fork runs with its own session id');
      const [hostname, machineId] = (await api.exec(f.id, 'hostname; cat /etc/machine-id')).stdout.split('\n');
      assert.equal(hostname, `space-${f.id.split('_')[1]!.slice(0, 8)}`, 'a fork gets its own hostname');
      assert.notEqual(machineId, parentIdentity.split('\n')[1], 'and its own machine id');
      const first = await count(f.id);
      assert.ok(await advances(f.id, first), `fork ${i} counts on from the checkpoint`);
      await api.exec(f.id, `echo fork-${i} > /workspace/who`);
    }
    assert.equal((await api.exec(forks[0].id, 'cat /workspace/who')).stdout, 'fork-0\n');
    assert.equal((await api.exec(forks[1].id, 'cat /workspace/who')).stdout, 'fork-1\n');
    assert.equal((await api.exec(parent.id, 'cat /workspace/who')).stdout, 'parent\n');
  });

  // Found while hardening the platform: with the Node.js daemon, a sandbox running on from a memory
  // image whose daemon had a history sometimes answered no call once it started a background process
  // (stale epoll entries after the restore). The native agent does not have it.
  test('a later sandbox of a session keeps answering after a full checkpoint and a background process', { timeout: 120_000 }, async () => {
    for (let round = 0; round < 3; round++) {
      const session = await created();
      await api.exec(session.id, 'echo x > /workspace/f');
      await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
      await api.exec(session.id, 'cat /workspace/f');
      assert.equal((await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' })).status, 201);
      await api.exec(session.id, 'sleep 600', { background: true });
      await sleep(300);
      const reply = await api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: 'echo alive' });
      assert.equal(reply.status, 200, `round ${round}: ${JSON.stringify(reply.body)}`);
    }
  });
});

describe('full checkpoints written straight to the volume (SPACE_CHECKPOINT_STAGING_MB=0)', () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];
  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)), { env: { SPACE_CHECKPOINT_STAGING_MB: '0' } });

  test('the image is written to the volume while the sandbox is paused, and a resume restores it', { timeout: 120_000 }, async () => {
    assert.equal(existsSync(imageStagingDir(platform.dataDir)), false, 'nothing is staged in host memory');
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(session.id);
    const { pid } = await api.exec(session.id, ['sh', '-c', counter], { background: true });
    while ((await api.exec(session.id, 'test -s /tmp/count')).exitCode !== 0) await sleep(100);
    const reply = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    assert.ok(existsSync(path.join(platform.dataDir, 'btrfs', 'checkpoints', `${reply.body.id}.memory`)));
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    const processes = (await api.call('GET', `/v1/sessions/${session.id}/processes`)).body.processes;
    assert.ok(
      processes.some((p: any) => p.pid === pid && p.running),
      `the counter runs again in the restored sandbox: ${JSON.stringify(processes)}`,
    );
    assert.equal((await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory.at(-1).restoredFrom, reply.body.id);
  });
});
