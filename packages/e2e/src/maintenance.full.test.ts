import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Api, metricValue } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';
import { sandboxHostPid } from './host-state.js';
import { rowsQuery, sqliteWriter } from './harness/sqlite-writer.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls until `check` holds or `timeoutMs` passes; returns the last value seen. */
async function waitFor<T>(read: () => Promise<T>, check: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await read();
  while (!check(value) && Date.now() < deadline) {
    await sleep(250);
    value = await read();
  }
  return value;
}

describe('automatic checkpoints, retention, idle stop and metrics', () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];

  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)), {
    // A full checkpoint pauses a sandbox here for about 0.6 s: 10% lets a busy one get them at the 10 s floor.
    env: { SPACE_MAINTENANCE_TICK_MS: '300', SPACE_CHECKPOINT_KEEP: '2', SPACE_FULL_CHECKPOINT_PAUSE_PERCENT: '10' },
  });

  test('automatic checkpoints are taken on schedule and only the newest are kept; manual ones stay', { timeout: 120_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 1, idleTimeoutSec: 0 });
    sessions.push(session.id);
    assert.deepEqual([session.checkpointIntervalSec, session.idleTimeoutSec], [1, 0]);
    const manual = (await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, {})).body;
    // Automatic checkpoints are taken only of a volume that changed: something keeps writing.
    const writer = await api.exec(session.id, 'while true; do date +%s%N > /workspace/now; sleep 0.3; done', { background: true });
    const list = async () => (await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints as { id: string; trigger: string }[];
    const seen = new Set<string>();
    await waitFor(
      async () => {
        const current = await list();
        for (const c of current) if (c.trigger === 'auto') seen.add(c.id);
        return current;
      },
      () => seen.size >= 4,
      30_000,
    );
    assert.ok(seen.size >= 4, `only ${seen.size} automatic checkpoints in 30 s`);
    // A new automatic checkpoint is stored before the oldest goes, so a listing may briefly show one more.
    const final = await waitFor(list, (current) => current.filter((c) => c.trigger === 'auto').length <= 2, 5000);
    assert.ok(final.filter((c) => c.trigger === 'auto').length <= 2, JSON.stringify(final));
    assert.ok(
      final.some((c) => c.id === manual.id),
      'the manual checkpoint is kept',
    );
    // A path's history over checkpoints pruned in between: the kept ones only, in order; a pruned one's files are 404.
    // (The writer stopped first: no checkpoint is taken or pruned while the history is read.)
    await api.call('POST', `/v1/sessions/${session.id}/processes/${writer.pid}/signal`, { signal: 'SIGKILL' });
    await sleep(2000);
    const history = (await api.call('GET', `/v1/sessions/${session.id}/files/history?path=now`)).body;
    const versions = history.versions as { checkpointId: string; change: string }[];
    const pruned = [...seen].filter((id) => !versions.some((v) => v.checkpointId === id));
    assert.ok(pruned.length >= 2, `pruned: ${pruned.join(', ')}`);
    assert.equal(versions[0]?.checkpointId, manual.id);
    // The last one may be taken after the writer stopped, for another file it changed (its output in /tmp).
    const changes = versions.map((v) => v.change);
    assert.deepEqual(changes.slice(0, 2), ['absent', 'added'], 'taken before the writer ran, then after it wrote');
    assert.ok(
      changes.slice(2).every((c, i, rest) => c === 'modified' || (c === 'unchanged' && i === rest.length - 1)),
      `written by it each time: ${changes.join(', ')}`,
    );
    assert.equal((await api.bytes(`/v1/checkpoints/${pruned[0]}/files?path=now`)).status, 404);
    // Its writer and checkpoints every second would otherwise share the maintenance passes with the next tests.
    await api.call('DELETE', `/v1/sessions/${session.id}`);
  });

  test('a session whose files did not change gets no new automatic checkpoint; a write brings the next one', { timeout: 120_000 }, async () => {
    const metric = async (name: string) => metricValue((await api.call('GET', '/metrics')).body, name);
    const skipped = () => metric('space_checkpoints_skipped_unchanged_total');
    const quiet = () => metric('space_checkpoints_skipped_quiet_total');
    const [skippedBefore, quietBefore] = [await skipped(), await quiet()];
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 1, idleTimeoutSec: 0 });
    sessions.push(session.id);
    const autos = async () =>
      ((await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints as { trigger: string }[]).filter((c) => c.trigger === 'auto').length;
    // The first one comes (nothing was saved yet), then the volume stays as it is.
    assert.equal(await waitFor(autos, (n) => n >= 1, 20_000), 1);
    // Nothing came in and no process ran since the first checkpoint: the node's list says so, the next
    // look skips the due checkpoint without asking the node, and no look follows (passes every 300 ms).
    assert.equal(await waitFor(quiet, (n) => n >= quietBefore + 1, 20_000), quietBefore + 1, 'skipped from the node list, without asking it');
    await sleep(3000);
    assert.deepEqual([(await skipped()) - skippedBefore, (await quiet()) - quietBefore], [1, 1], 'not looked at again');
    assert.equal(await autos(), 1, 'no checkpoint of an unchanged volume');
    // A write by the daemon itself (no process runs), then one by a command: each brings the next.
    await api.call('PUT', `/v1/sessions/${session.id}/files?path=/workspace/f`, undefined, { raw: 'uploaded' });
    assert.equal(await waitFor(autos, (n) => n >= 2, 20_000), 2, 'an upload brings the next automatic checkpoint');
    // Quiet again after that one: the command below is the next thing to come in.
    await waitFor(quiet, (n) => n >= quietBefore + 2, 20_000);
    // Two automatic checkpoints are kept here (SPACE_CHECKPOINT_KEEP): the next is told by its id.
    const newestAuto = async () =>
      ((await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints as { id: string; trigger: string }[])
        .filter((c) => c.trigger === 'auto')
        .at(-1)?.id;
    const before = await newestAuto();
    await api.exec(session.id, 'echo changed > /workspace/f');
    assert.notEqual(await waitFor(newestAuto, (id) => id !== before, 20_000), before, 'a command writing brings the next automatic checkpoint');
  });

  test('a process left running by a call writes after the next checkpoint: the one after it holds the write', { timeout: 120_000 }, async () => {
    // base: its nohup outlives the shell that started it (busybox's does not).
    const session = await api.createSession({ template: 'base', checkpointIntervalSec: 1, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(session.id);
    // No call comes in after this one: only the process it left, alive at the next checkpoint, writes.
    await api.exec(session.id, ['sh', '-c', "nohup sh -c 'sleep 4; echo late > /workspace/late' >/dev/null 2>&1 &"]);
    assert.ok((await api.call('GET', `/v1/sessions/${session.id}/processes`)).body.untracked >= 1, 'the process outlived its call');
    const holdsLate = async () => {
      const { checkpoints } = (await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body as { checkpoints: { id: string }[] };
      for (const c of checkpoints) if ((await api.bytes(`/v1/checkpoints/${c.id}/files?path=late`)).status === 200) return true;
      return false;
    };
    assert.ok(await waitFor(holdsLate, (held) => held, 30_000), 'an automatic checkpoint holds the late write');
  });

  test('an idle sandbox is checkpointed and stopped; the next call resumes it with its files', { timeout: 120_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, idleTimeoutSec: 2 });
    sessions.push(session.id);
    await api.exec(session.id, 'echo before-idle > /workspace/f');
    const idle = await waitFor(
      async () => (await api.call('GET', `/v1/sessions/${session.id}`)).body,
      (s) => s.status === 'idle',
      30_000,
    );
    assert.equal(idle.status, 'idle');
    assert.equal(idle.sandbox, null);
    assert.equal(idle.sandboxHistory.at(-1).endReason, 'idle');
    assert.ok(idle.checkpoints.length >= 1, 'a checkpoint is taken before stopping');
    assert.equal((await api.exec(session.id, 'cat /workspace/f')).stdout, 'before-idle\n');
    assert.equal((await api.call('GET', `/v1/sessions/${session.id}`)).body.status, 'running');
  });

  test('an idle sandbox with a running process is stopped after a full checkpoint; the process runs again on resume', { timeout: 120_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, idleTimeoutSec: 2 });
    sessions.push(session.id);
    const { pid } = await api.exec(session.id, ['sleep', '600'], { background: true });
    const idle = await waitFor(
      async () => (await api.call('GET', `/v1/sessions/${session.id}`)).body,
      (s) => s.status === 'idle',
      30_000,
    );
    assert.equal(idle.status, 'idle');
    assert.equal(idle.checkpoints.at(-1).kind, 'full');
    const { processes } = (await api.call('GET', `/v1/sessions/${session.id}/processes`)).body;
    assert.ok(
      processes.some((p: any) => p.pid === pid && p.running),
      JSON.stringify(processes),
    );
  });

  test('a loop started with nohup … & counts for automatic full checkpoints; after a kill it runs on from one', { timeout: 120_000 }, async () => {
    // base: busybox's nohup (tiny) does not outlive the shell that started it; coreutils' does.
    const session = await api.createSession({ template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 2, idleTimeoutSec: 0 });
    sessions.push(session.id);
    const listed = async () => (await api.call('GET', `/v1/sessions/${session.id}/processes`)).body;
    assert.equal((await listed()).untracked, 0, 'a fresh sandbox runs nothing but its init and daemon');
    // The README's pattern: the exec returns at once, the loop is nobody's child but init's.
    const loop = 'i=0; while true; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.2; done';
    assert.equal((await api.exec(session.id, ['sh', '-c', `nohup sh -c '${loop}' >/dev/null 2>&1 &`])).exitCode, 0);
    const now = await listed();
    assert.ok(now.untracked >= 1 && !now.processes.some((p: any) => p.running), JSON.stringify(now));
    const full = await waitFor(
      async () =>
        (await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints.find((c: any) => c.kind === 'full' && c.trigger === 'auto'),
      (c) => c !== undefined,
      30_000,
    );
    assert.ok(full, 'an automatic full checkpoint of a sandbox whose only process is a nohup loop');
    assert.equal((await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`)).status, 200);
    const count = async () => Number((await api.exec(session.id, ['cat', '/tmp/n'])).stdout);
    const first = await count();
    const later = await waitFor(count, (n) => n > first, 5000);
    assert.ok(later > first, `the loop runs again after the kill (${first} then ${later})`);
    const history = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory;
    assert.ok(history.at(-1).restoredFrom, `restored from a full checkpoint: ${JSON.stringify(history.at(-1))}`);
  });

  test('an idle sandbox with a dev server stops with its memory saved; a request to its preview URL brings the server back', { timeout: 120_000 }, async () => {
    const session = await api.createSession({ template: 'base', checkpointIntervalSec: 0, idleTimeoutSec: 2 });
    sessions.push(session.id);
    await api.exec(session.id, ['sh', '-c', 'mkdir -p /workspace/site && echo served > /workspace/site/index.html']);
    await api.exec(session.id, ['python3', '-m', 'http.server', '8000', '--directory', '/workspace/site'], { background: true });
    const previewed = () =>
      fetch(`${platform.url}/v1/sessions/${session.id}/ports/8000/index.html`, {
        headers: { authorization: `Bearer ${api.key}`, 'x-space-listen-wait-ms': '10000' },
      });
    assert.equal((await previewed()).status, 200);
    const idle = await waitFor(
      async () => (await api.call('GET', `/v1/sessions/${session.id}`)).body,
      (s) => s.status === 'idle',
      30_000,
    );
    assert.equal(idle.checkpoints.at(-1).kind, 'full');
    const woken = await previewed();
    assert.deepEqual([woken.status, await woken.text()], [200, 'served\n']);
    const history = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory;
    assert.equal(history.at(-1).restoredFrom, idle.checkpoints.at(-1).id);
  });

  test('while a SQLite writer runs, full checkpoints come every ~10 s, not at the 60 s interval; a kill rolls back seconds, kept in a resume checkpoint', {
    timeout: 120_000,
  }, async () => {
    const session = await api.createSession({ template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 60, idleTimeoutSec: 0 });
    sessions.push(session.id);
    await api.exec(session.id, ['python3', '-c', sqliteWriter], { background: true });
    const rows = async (untilAt?: number): Promise<[number, number]> => JSON.parse((await api.exec(session.id, ['python3', '-c', rowsQuery(untilAt)])).stdout);
    await waitFor(rows, ([count]) => count > 0, 10_000).catch(() => undefined);
    // The first full checkpoint measures what one pauses; the maintenance plans the next from it.
    const manual = (await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' })).body;
    assert.equal(manual.kind, 'full', JSON.stringify(manual));
    const autos = async () =>
      ((await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints as any[]).filter((c) => c.kind === 'full' && c.trigger === 'auto');
    const two = await waitFor(autos, (list) => list.length >= 2, 45_000);
    assert.ok(two.length >= 2, `two automatic full checkpoints within 45 s of the manual one: ${JSON.stringify(two)}`);
    const gap = (Date.parse(two[1].createdAt) - Date.parse(two[0].createdAt)) / 1000;
    assert.ok(gap >= 9 && gap < 30, `automatic full checkpoints ${gap} s apart`);
    await sleep(3000);
    const [acknowledged, lastAt] = await rows();
    assert.equal((await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`)).status, 200);
    const [kept, keptUntil] = await rows(lastAt);
    const rolledBackSec = lastAt - keptUntil;
    assert.ok(
      rolledBackSec < 15,
      `${acknowledged - kept} acknowledged rows (${rolledBackSec.toFixed(1)} s) rolled back; the newest full checkpoint was due every ~10 s`,
    );
    const history = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory;
    const keptIn = /the files written after it are kept in (ckp_\w+)/.exec(history.at(-1).note ?? '')?.[1];
    const checkpoints = (await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints as any[];
    assert.equal(
      checkpoints.find((c) => c.id === keptIn)?.trigger,
      'resume',
      `the history says where the rolled-back files are: ${JSON.stringify(history.at(-1))}`,
    );
  });

  test('/metrics counts sandbox starts, deaths, resumes and checkpoints', { timeout: 60_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(session.id);
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    const resumed = await api.exec(session.id, 'true');
    assert.equal(resumed.exitCode, 0);
    const current = (await api.call('GET', `/v1/sessions/${session.id}`)).body;
    process.kill(sandboxHostPid(platform.dataDir, current.sandbox.id), 'SIGKILL');
    await sleep(200);
    await api.exec(session.id, 'true');
    const res = await fetch(`${platform.url}/metrics`);
    assert.equal(res.status, 200);
    const text = await res.text();
    const value = (series: string): number => metricValue(text, series);
    assert.ok(value('space_resumes_total') >= 3, text);
    assert.ok(value('space_sandbox_deaths_total') >= 1, text);
    assert.ok(value('space_sandbox_starts_total') >= 5, text);
    assert.ok(value('space_idle_stops_total') >= 1, text);
    assert.ok(value('space_checkpoints_total{kind="fs",trigger="auto"}') >= 4, text);
    assert.ok(value('space_resume_seconds_count') >= 2, text);
    assert.ok(value('space_sessions{status="running"}') >= 1, text);
    assert.match(text, /# TYPE space_resume_seconds histogram/);
  });
});
