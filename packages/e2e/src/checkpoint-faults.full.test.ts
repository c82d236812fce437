import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import type { Api } from './client.js';
import { imageStagingDir, sandboxHostPid } from './host-state.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * A runsc whose every `checkpoint` fails, as a save that went wrong (disk full, a runtime fault)
 * would, while everything else goes to the real runsc: found first on the platform's PATH.
 */
function failingCheckpointRunsc(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-failing-runsc-'));
  const runsc = path.join(dir, 'runsc');
  writeFileSync(
    runsc,
    '#!/bin/sh\nfor a in "$@"; do [ "$a" = checkpoint ] && { echo "injected: the checkpoint failed" >&2; exit 1; }; done\nexec /usr/bin/runsc "$@"\n',
    { mode: 0o755 },
  );
  return dir;
}

describe('a full checkpoint that fails', () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];
  const wrapperDir = failingCheckpointRunsc();
  after(() => rmSync(wrapperDir, { recursive: true, force: true }));

  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)), { env: { PATH: `${wrapperDir}:${process.env.PATH}` } });

  test('leaves the paused sandbox running: its processes go on, it answers, an fs checkpoint is taken instead, nothing half-written stays', {
    timeout: 120_000,
  }, async () => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(session.id);
    await api.exec(session.id, 'i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done', {
      background: true,
    });
    await sleep(300);

    const checkpoints = path.join(platform.dataDir, 'btrfs', 'checkpoints');
    const images = (): string[] => readdirSync(checkpoints).filter((name) => name.includes('.memory'));
    const imagesBefore = images();
    const reply = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
    assert.equal(reply.body.error?.code, 'FULL_CHECKPOINT_FAILED', JSON.stringify(reply.body));
    assert.match(reply.body.error.message, /injected: the checkpoint failed/);

    const now = (await api.call('GET', `/v1/sessions/${session.id}`)).body;
    assert.equal(now.sandbox.id, session.sandbox.id, 'the same sandbox serves the session');
    const before = Number((await api.exec(session.id, 'cat /tmp/count')).stdout);
    await sleep(500);
    const later = Number((await api.exec(session.id, 'cat /tmp/count')).stdout);
    assert.ok(later > before, `the process runs on after the failed checkpoint (${before} -> ${later})`);
    assert.deepEqual(images(), imagesBefore, 'no memory image, whole or partial, is left');
    assert.deepEqual(readdirSync(imageStagingDir(platform.dataDir)), [], 'nor in host memory, where it was being written');
    const recorded = (await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints;
    assert.deepEqual(
      recorded.map((c: any) => [c.id, c.kind]),
      [[reply.body.error.details.fallbackCheckpointId, 'fs']],
      'the files were saved in an fs checkpoint instead, which the error names',
    );
  });
});

describe('a checkpoint of a sandbox killed from outside', () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];
  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)));

  test('answers within seconds, and the session answers after it: the node never waits for the dead daemon', { timeout: 120_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(session.id);
    // A call leaves the node's connection to the daemon open and idle; the next goes out on it.
    await api.exec(session.id, 'echo one > /workspace/one');
    // Killed from outside (out of memory, a crash): its network stack goes with it, so nothing resets
    // that connection; a request written on it is answered by no one.
    process.kill(sandboxHostPid(platform.dataDir, session.sandbox.id), 'SIGKILL');
    const started = Date.now();
    const reply = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' }, { signal: AbortSignal.timeout(60_000) });
    const tookMs = Date.now() - started;
    assert.ok(tookMs < 15_000, `the checkpoint answered in ${tookMs} ms: ${reply.status} ${JSON.stringify(reply.body)}`);
    // Nothing of the dead sandbox's cached writes could be flushed: no checkpoint, and the error says why.
    assert.equal(reply.body.error?.code, 'SANDBOX_DIED', JSON.stringify(reply.body));
    const after = await api.exec(session.id, 'cat /workspace/one');
    assert.equal(after.stdout, 'one\n', 'the session resumes on its next call');
  });
});
