import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import type { LocalCluster } from '@space/cli';
import { Api } from './client.js';
import { NodePartition } from './harness/node-partition.js';
import { nodeClientOf, smallCluster } from './harness/small-cluster.js';
import { cliMain, testDataDir } from './platform.js';
import { TestUpstream } from './test-upstream.js';

// A node cut off by a real partition (iptables, both directions between it and every control plane;
// the node agent, its gateway and its sandboxes alive): `smallCluster`'s nodes fence themselves after
// 2 s without an acknowledged heartbeat, and control planes find one lost after 3 s.
const run = promisify(execFile);
const adminKey = `partition-test-${process.pid}-${Date.now()}`;
const fenceAfterMs = 2000;
let cluster: LocalCluster;
let apis: Api[];
let upstream: TestUpstream;
let partition: NodePartition;
const sessions: string[] = [];
const memberLines: string[] = [];

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

before(async () => {
  upstream = new TestUpstream(['plain.test.space']);
  await upstream.start();
  const output = (member: string, line: string): void => void (memberLines.push(`[${member}] ${line}`), memberLines.splice(0, memberLines.length - 500));
  cluster = await smallCluster({ dataDir: `${testDataDir}-partition`, adminKey, env: upstream.platformEnv(), output });
  await cluster.start();
  apis = cluster.controlPlaneUrls.map((url) => new Api(url, adminKey));
  partition = new NodePartition(cluster.root);
});

after(async () => {
  partition?.heal();
  for (const id of sessions) await apis?.[0]?.call('DELETE', `/v1/sessions/${id}`).catch(() => undefined);
  await cluster?.stop();
  await upstream?.stop();
  const mounts = execFileSync('mount', { encoding: 'utf8' });
  assert.ok(!mounts.includes(`${cluster.root}/`), `a node's storage is still mounted:\n${mounts}`);
});

async function nodeStatus(id: string): Promise<string | undefined> {
  return ((await apis[0]!.call('GET', '/v1/nodes')).body.nodes as { id: string; status: string }[]).find((n) => n.id === id)?.status;
}

/**
 * A session on node `victim` (new ones until one lands there) whose /tmp/kept is in a checkpoint that
 * reached the object store: the session, once moved, has it.
 */
async function sessionOnWithShippedFile(victim: string, settings: Record<string, unknown> = {}): Promise<string> {
  let session: { id: string; nodeId: string } | undefined;
  for (let i = 0; i < 20 && session?.nodeId !== victim; i++) {
    session = await apis[i % 2]!.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, ...settings });
    sessions.push(session!.id);
  }
  assert.equal(session?.nodeId, victim, `20 new sessions and none on ${victim}`);
  const id = session!.id;
  await apis[0]!.exec(id, ['sh', '-c', 'echo kept > /tmp/kept']);
  assert.equal((await apis[1]!.call('POST', `/v1/sessions/${id}/checkpoints`, { kind: 'fs' })).status, 201);
  while (!(await apis[0]!.call('GET', `/v1/sessions/${id}/checkpoints`)).body.checkpoints.every((c: { shippedAt: string | null }) => c.shippedAt))
    await pause(100);
  return id;
}

/** The URL of node `id`'s API. */
async function nodeUrlOf(id: string): Promise<string> {
  return ((await apis[0]!.call('GET', '/v1/nodes')).body.nodes as { id: string; url: string }[]).find((n) => n.id === id)!.url;
}

/** Cuts node `victim` off from every control plane; when. */
async function cutOff(victim: string): Promise<number> {
  const nodeUrl = await nodeUrlOf(victim);
  const cutAt = Date.now();
  partition.cut({
    nodePid: cluster.member(victim)!.process.pid!,
    nodePort: Number(new URL(nodeUrl).port),
    controlPlanePorts: cluster.controlPlaneUrls.map((u) => Number(new URL(u).port)),
  });
  return cutAt;
}

/** When the session first served its /tmp/kept again (from another node); fails the test past `withinMs` after `cutAt`. */
async function servedAgain(id: string, cutAt: number, withinMs: number): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    assert.ok(
      Date.now() - cutAt < withinMs,
      `the session did not serve from another node within ${withinMs / 1000} s of the cut: ${memberLines.slice(-20).join('\n')}`,
    );
    const reply = await apis[attempt % 2]!.call('POST', `/v1/sessions/${id}/exec`, { cmd: ['cat', '/tmp/kept'] }, { signal: AbortSignal.timeout(2000) }).catch(
      () => null,
    );
    if (reply?.status === 200 && reply.body.stdout === 'kept\n') return Date.now();
    await pause(200);
  }
}

test('a node cut off from every control plane fences itself: its copy stops writing and sending before the session moves, and never acts again; calls whose callers gave up never run', {
  timeout: 180_000,
}, async () => {
  const victim = 'node-1';
  // Acknowledged and in a checkpoint that reached the object store: the moved session has it.
  const id = await sessionOnWithShippedFile(victim, { egress: { mode: 'allow-list', domains: ['plain.test.space'] } });
  // The copy's work: a line in a file and a request out through the gateway, five times a second.
  const loop = `i=0; while true; do i=$((i+1)); echo $i >> /tmp/beats; wget -q -O /dev/null "http://plain.test.space/beat?s=${id}&i=$i"; sleep 0.2; done`;
  assert.equal((await apis[0]!.call('POST', `/v1/sessions/${id}/exec`, { cmd: ['sh', '-c', loop], background: true })).status, 200);
  const beats = () => upstream.requests.filter((r) => r.url.startsWith(`/beat?s=${id}&`));
  while (beats().length < 5) await pause(100);

  const copySandboxId: string = (await apis[0]!.call('GET', `/v1/sessions/${id}`)).body.sandbox.id;
  const nodeUrl = await nodeUrlOf(victim);
  const cutAt = await cutOff(victim);

  // Calls whose callers give up after a second, as the session's node stops answering: none may run later, anywhere.
  for (let k = 0; k < 3; k++)
    void apis[k % 2]!.call(
      'POST',
      `/v1/sessions/${id}/exec`,
      { cmd: ['sh', '-c', `echo late-${k} >> /tmp/late`] },
      { signal: AbortSignal.timeout(1000) },
    ).catch(() => undefined);

  // The session moves and serves from another node, from its shipped checkpoint.
  const servedAt = await servedAgain(id, cutAt, 15_000);
  const moved = (await apis[0]!.call('GET', `/v1/sessions/${id}`)).body;
  assert.notEqual(moved.nodeId, victim);
  const lastBeatOfCopy = beats().at(-1)!;
  console.log(
    `# partition: the session served from ${moved.nodeId} ${servedAt - cutAt} ms after the cut; the cut-off copy's last request ${lastBeatOfCopy.at - cutAt} ms after it (fence after ${fenceAfterMs} ms)`,
  );
  assert.ok(lastBeatOfCopy.at - cutAt < fenceAfterMs + 1500, `the cut-off copy sent a request ${lastBeatOfCopy.at - cutAt} ms after the cut`);
  assert.ok(lastBeatOfCopy.at < servedAt, 'the cut-off copy stopped sending before the session served elsewhere');
  assert.ok(
    memberLines.some((l) => l.startsWith(`[${victim}]`) && l.includes('fencing this node')),
    'the node says it fenced itself',
  );

  // Partitioned for a while longer: the copy stays frozen.
  const requestsBefore = beats().length;
  await pause(Math.max(0, cutAt + 8000 - Date.now()));
  assert.equal(beats().length, requestsBefore, 'no request from the fenced copy');
  partition.heal();
  const healedAt = Date.now();
  while ((await nodeStatus(victim)) !== 'ready') {
    assert.ok(Date.now() - healedAt < 15_000, 'the node is not ready again within 15 s of the heal');
    await pause(200);
  }
  // Back, the node stops the moved session's copy instead of letting it run on.
  await pause(3000);
  assert.equal(beats().length, requestsBefore, 'the old copy never sent again after the heal');
  const node = await nodeClientOf(cluster, victim, nodeUrl);
  const left = (await node.listSandboxes()).filter((s) => s.sessionId === id);
  node.close();
  assert.deepEqual(left, [], "the moved session's old sandbox is gone from the node");
  assert.equal((await apis[1]!.exec(id, ['cat', '/tmp/kept'])).stdout, 'kept\n');

  // What the copy wrote is rescued into a checkpoint: its last line was written before the fence, as its last request was.
  let rescue: { id: string } | undefined;
  for (const started = Date.now(); !rescue && Date.now() - started < 30_000; await pause(250))
    rescue = (await apis[0]!.call('GET', `/v1/sessions/${id}/checkpoints`)).body.checkpoints.find((c: { trigger: string }) => c.trigger === 'rescue');
  assert.ok(rescue, 'no rescue checkpoint within 30 s');
  const fork = await apis[1]!.call('POST', `/v1/checkpoints/${rescue.id}/fork`, {});
  assert.equal(fork.status, 201, JSON.stringify(fork.body));
  sessions.push(fork.body.sessions[0].id);
  const written = (await apis[0]!.exec(fork.body.sessions[0].id, ['sh', '-c', 'tail -n 1 /tmp/beats'])).stdout.trim();
  const lastSent = Number(new URL(lastBeatOfCopy.url, 'http://x').searchParams.get('i'));
  assert.ok(Number(written) <= lastSent + 1, `the copy wrote line ${written} after its last request (${lastSent}): it went on writing while fenced`);
  for (const copy of [id, fork.body.sessions[0].id])
    assert.equal((await apis[0]!.exec(copy, ['sh', '-c', 'cat /tmp/late 2>/dev/null; true'])).stdout, '', 'a call whose caller gave up ran later');

  // What the copy did stays on record: every request it sent is in the session's egress audit
  // (kept in the store before its node deleted its own), and its history says it ended at the fence.
  const audit = (await apis[1]!.call('GET', `/v1/sessions/${id}/egress/audit?limit=1000`)).body.entries as {
    sandboxId: string;
    path: string;
    decision: string;
  }[];
  // Those the gateway let through, as the upstream saw them (one refused as the fence began never left).
  const auditedBeats = audit.filter((e) => e.sandboxId === copySandboxId && e.decision !== 'denied' && e.path.startsWith(`/beat?s=${id}&`)).map((e) => e.path);
  assert.deepEqual(
    auditedBeats,
    beats().map((r) => r.url),
    "the session's audit holds each request of the cut-off copy, once, in order",
  );
  const history = (await apis[0]!.call('GET', `/v1/sessions/${id}`)).body.sandboxHistory as { id: string; endedAt: string; endReason: string; note: string }[];
  const copy = history.find((h) => h.id === copySandboxId)!;
  console.log(`# partition: the cut-off copy's history: ended ${copy.endReason} at +${Date.parse(copy.endedAt) - cutAt} ms (${copy.note})`);
  assert.equal(copy.endReason, 'fenced', JSON.stringify(copy));
  assert.ok(
    Date.parse(copy.endedAt) - cutAt < fenceAfterMs + 1500 && Date.parse(copy.endedAt) >= lastBeatOfCopy.at - 50,
    `the copy is recorded ended at the fence: ${JSON.stringify(copy)}`,
  );
  assert.match(copy.note, /paused by its node's fence at .* and stopped at .* when the node was heard again/);
});

test('a lifecycle operation waiting on a node when it is cut off ends once the node is lost: its caller gets 503 and the session moves', {
  timeout: 120_000,
}, async () => {
  const victim = 'node-2';
  const id = await sessionOnWithShippedFile(victim);
  const cutAt = await cutOff(victim);
  try {
    // Asked at once, before the node is found lost: the control plane sends it to the node, whose
    // answer never comes (the partition drops every packet), while it holds the session's turn.
    const checkpoint = apis[1]!.call('POST', `/v1/sessions/${id}/checkpoints`, { kind: 'fs' }, { signal: AbortSignal.timeout(60_000) }).then(
      (reply) => ({ ...reply, at: Date.now() }),
      (err: Error) => ({ status: 0, body: err.message, at: Date.now() }),
    );
    const servedAt = await servedAgain(id, cutAt, 30_000);
    const answered = await checkpoint;
    console.log(
      `# partition: the checkpoint in flight answered ${answered.status} ${answered.at - cutAt} ms after the cut; the session served elsewhere after ${servedAt - cutAt} ms`,
    );
    assert.equal(answered.status, 503, JSON.stringify(answered.body));
    assert.equal(answered.body.error.code, 'NODE_UNAVAILABLE');
    assert.notEqual((await apis[0]!.call('GET', `/v1/sessions/${id}`)).body.nodeId, victim);
  } finally {
    partition.heal();
  }
});

test('the fence delay must be below the lost delay: a control plane refuses to start otherwise, and refuses a node that would fence too late', async () => {
  const refused = await run(process.execPath, [cliMain, 'control-plane'], {
    env: { ...process.env, SPACE_NODE_FENCE_AFTER_SEC: '10', SPACE_NODE_LOST_AFTER_SEC: '10', SPACE_DATA_DIR: path.join(cluster.root, 'refused') },
  }).then(
    () => null,
    (err: { code: number; stderr: string }) => err,
  );
  assert.ok(refused, 'the control plane started');
  assert.match(refused.stderr, /SPACE_NODE_FENCE_AFTER_SEC \(10\) must be below SPACE_NODE_LOST_AFTER_SEC \(10\)/);
  const late = await apis[0]!.call('POST', '/v1/nodes/heartbeat', {
    id: 'node-late',
    url: 'http://127.0.0.1:1',
    token: 'x'.repeat(32),
    capacity: { memoryMb: 1024, cpus: 1 },
    sandboxes: 0,
    fenceAfterMs: 5000,
  });
  assert.equal(late.status, 400);
  assert.match(late.body.error.message, /SPACE_NODE_FENCE_AFTER_SEC.*SPACE_NODE_LOST_AFTER_SEC/);
  assert.equal(await nodeStatus('node-late'), undefined, 'the node was not registered');
});
