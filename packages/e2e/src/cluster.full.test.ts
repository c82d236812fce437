import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { promisify } from 'node:util';
import { existsSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { after, before, test } from 'node:test';
import type { LocalCluster } from '@space/cli';
import { Api } from './client.js';
import { ClusterCa, placementViewMs } from '@space/control-plane';
import { CONTROL_PLANE_CERTIFICATE_NAME, ErrorCode, nodeRoutes } from '@space/protocol';
import { Upstream, makeTestCertificates, makeTestClientCertificate } from '@space/server-kit';
import { nodeClientOf, smallCluster } from './harness/small-cluster.js';
import { cliMain, testDataDir } from './platform.js';
import { cpuLoad } from './cpu-load.js';

// `space cluster up` in a test: one PostgreSQL, two control planes and three node agents on this
// machine, each node with its own data directory, btrfs image and sandboxes.
const run = promisify(execFile);
const adminKey = `cluster-test-${process.pid}-${Date.now()}`;
let cluster: LocalCluster;
let apis: Api[];
const sessions: string[] = [];
const memberLines: string[] = [];
/** What the control planes said of node certificates they renewed (the start's, beyond the last lines kept). */
const renewals: string[] = [];

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function nodes(api: Api): Promise<Record<string, { status: string; sessions: number; sandboxes: number; url: string }>> {
  const reply = await api.call('GET', '/v1/nodes');
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  return Object.fromEntries((reply.body.nodes as { id: string; status: string; sessions: number; sandboxes: number; url: string }[]).map((n) => [n.id, n]));
}

/** A new session on `nodeId`: placement decides, so sessions are created until one lands there (all are deleted after). */
async function sessionOn(nodeId: string, options: { secrets?: string[] } = {}): Promise<{ id: string; nodeId: string }> {
  for (let i = 0; i < 20; i++) {
    const session = await apis[i % 2]!.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, ...options });
    sessions.push(session.id);
    if (session.nodeId === nodeId) return session;
  }
  throw new Error(`20 new sessions and none on ${nodeId}`);
}

/** Resolves once every checkpoint of the session has reached the object store. */
async function untilShipped(sessionId: string): Promise<void> {
  while (!(await apis[0]!.call('GET', `/v1/sessions/${sessionId}/checkpoints`)).body.checkpoints.every((c: { shippedAt: string | null }) => c.shippedAt))
    await pause(100);
}

/** The CLI with the admin key, its --json output parsed. Not execFileSync: the loopback S3 server runs in this process and must keep answering. */
async function cli(...args: string[]): Promise<any> {
  const env = { ...process.env, SPACE_API_URL: cluster.controlPlaneUrls.join(','), SPACE_API_KEY: adminKey };
  return JSON.parse((await run(process.execPath, [cliMain, ...args, '--json'], { env })).stdout);
}

before(async () => {
  // A cluster of its own each run, removed after.
  // The members' last lines, for what a failure or a retried fetch left in their logs.
  const output = (member: string, line: string): void => {
    memberLines.push(`[${member}] ${line}`);
    memberLines.splice(0, memberLines.length - 500);
    if (/renewed the node API certificate of node/.test(line)) renewals.push(line);
  };
  // Renewed at once: every node's certificate (397 days) has fewer days left than that.
  // Usage sampled every 2 s: the metering test waits seconds.
  cluster = await smallCluster({
    dataDir: `${testDataDir}-cluster`,
    adminKey,
    output,
    env: { SPACE_NODE_CERT_RENEW_DAYS: '398', SPACE_USAGE_SAMPLE_SEC: '2' },
  });
  await cluster.start();
  apis = cluster.controlPlaneUrls.map((url) => new Api(url, adminKey));
});

after(async () => {
  // Whatever a failed test left, the cluster stops: its nodes stop their sandboxes and unmount.
  for (const id of sessions) await apis?.[0]?.call('DELETE', `/v1/sessions/${id}`).catch(() => undefined);
  await cluster?.stop();
  const mounts = execFileSync('mount', { encoding: 'utf8' });
  assert.ok(!mounts.includes(`${cluster.root}/`), `a node's storage is still mounted:\n${mounts}`);
});

test('sessions are spread over the nodes and served through either control plane', async () => {
  for (let i = 0; i < 6; i++) {
    // No automatic checkpoints: these sessions have none in the object store, so while their node is lost they wait for it.
    const session = await apis[i % 2]!.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    sessions.push(session.id);
    await apis[(i + 1) % 2]!.exec(session.id, ['sh', '-c', `echo ${session.id} > /tmp/who`]);
    // Each control plane places from its view of the nodes, read at most once in `placementViewMs`:
    // the other's placements are in it from the next read on.
    await pause(placementViewMs);
  }
  const view = await nodes(apis[1]!);
  assert.deepEqual(
    cluster.nodeNames.map((n) => [n, view[n]?.status, view[n]?.sessions]),
    cluster.nodeNames.map((n) => [n, 'ready', 2]),
  );
});

test('a node agent SIGKILLed is marked lost; the other nodes carry on and take the new sessions; back, it serves its sessions again', async () => {
  const onNode = async (id: string) => (await apis[0]!.call('GET', `/v1/sessions/${id}`)).body.nodeId as string;
  const placed = await Promise.all(sessions.map(async (id) => ({ id, node: await onNode(id) })));
  const victim = 'node-2';
  // One of its sessions denies all egress: its gateway answers 403 while it has the session's settings (a restarted agent has none until a control plane sends them again).
  const denying = placed.find((p) => p.node === victim)!.id;
  assert.equal((await apis[0]!.call('PUT', `/v1/sessions/${denying}/egress`, { mode: 'deny-all' })).status, 200);
  const probeGateway = async () => (await apis[1]!.exec(denying, ['sh', '-c', 'wget -O - http://198.18.0.1/ 2>&1'])).stdout;
  assert.match(await probeGateway(), /403 Forbidden/);
  const killedAt = Date.now();
  cluster.member(victim)!.process.kill('SIGKILL');
  while ((await nodes(apis[0]!))[victim]?.status !== 'lost') {
    assert.ok(Date.now() - killedAt < 15_000, `${victim} not marked lost within 15 s`);
    await pause(200);
  }
  console.log(`# ${victim} marked lost ${Date.now() - killedAt} ms after its SIGKILL (SPACE_NODE_LOST_AFTER_SEC=3, heartbeats every 500 ms)`);
  for (const { id, node } of placed) {
    const reply = await apis[1]!.call('POST', `/v1/sessions/${id}/exec`, { cmd: ['cat', '/tmp/who'] });
    if (node === victim) assert.equal(reply.body.error?.code, 'NODE_UNAVAILABLE', JSON.stringify(reply.body));
    else assert.equal(reply.body.stdout, `${id}\n`, `${id} on ${node}`);
  }
  for (let i = 0; i < 3; i++) {
    const session = await apis[i % 2]!.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    sessions.push(session.id);
    assert.notEqual(session.nodeId, victim, 'no new session on a lost node');
  }
  await cluster.startNode(victim);
  while ((await nodes(apis[1]!))[victim]?.status !== 'ready') await pause(200);
  for (const { id } of placed.filter((p) => p.node === victim)) assert.equal((await apis[0]!.exec(id, ['cat', '/tmp/who'])).stdout, `${id}\n`);
  // Its heartbeats named the sessions whose egress settings it lost, and the control plane that took one sent them again.
  const backAt = Date.now();
  let answer = await probeGateway();
  while (!/403 Forbidden/.test(answer) && Date.now() - backAt < 20_000) {
    await pause(500);
    answer = await probeGateway();
  }
  assert.match(answer, /403 Forbidden/, 'the deny-all settings are back');
  console.log(`# ${victim}'s gateway had the settings of its adopted sandboxes again ${Date.now() - backAt} ms after the node was ready`);
});

test('a node agent SIGKILLed under busy sessions: each goes on on another node from its newest shipped checkpoint; back, the node runs none of them, and what they wrote there after it is rescued into a checkpoint', async () => {
  const victim = 'node-3';
  // Sessions on the victim, each with a file in a checkpoint that reached the object store, and one written after it.
  const mine: string[] = [];
  const shippedCheckpoints: string[] = [];
  while (mine.length < 2) mine.push((await sessionOn(victim)).id);
  for (const id of mine) {
    await apis[0]!.exec(id, ['sh', '-c', `echo kept-${id} > /tmp/kept`]);
    const checkpoint = await apis[1]!.call('POST', `/v1/sessions/${id}/checkpoints`, { kind: 'fs' });
    assert.equal(checkpoint.status, 201, JSON.stringify(checkpoint.body));
    shippedCheckpoints.push(checkpoint.body.id);
    await untilShipped(id);
    await apis[0]!.exec(id, ['sh', '-c', 'echo after > /tmp/after']);
  }
  // The agent dies; its sandboxes keep running, cut off.
  const killedAt = Date.now();
  cluster.member(victim)!.process.kill('SIGKILL');
  while ((await nodes(apis[0]!))[victim]?.status !== 'lost') await pause(100);
  const detected = Date.now();
  for (const [i, id] of mine.entries()) {
    const started = Date.now();
    const reply = await apis[i % 2]!.exec(id, ['cat', '/tmp/kept']);
    assert.equal(reply.stdout, `kept-${id}\n`, 'the files of the newest shipped checkpoint');
    console.log(`# ${id} answered on its new node ${Date.now() - started} ms after the first call (${detected - killedAt} ms to detect the loss)`);
    const session = (await apis[0]!.call('GET', `/v1/sessions/${id}`)).body;
    assert.notEqual(session.nodeId, victim);
    assert.match(session.sandboxHistory.at(-1).note, new RegExp(`node ${victim} was lost: the session moved to node ${session.nodeId}`));
    assert.equal(
      (await apis[1]!.exec(id, ['sh', '-c', 'cat /tmp/after || echo gone'])).stdout,
      'gone\n',
      'written after the checkpoint: stays behind on the lost node',
    );
  }
  // The lost node's checkpoints are still read and compared: a live node holds them from the object store.
  const [, moved] = mine;
  const kept = await apis[0]!.bytes(`/v1/checkpoints/${shippedCheckpoints[1]}/files?path=/tmp/kept`);
  assert.deepEqual([kept.status, kept.data.toString()], [200, `kept-${moved}\n`]);
  await apis[1]!.exec(moved!, ['sh', '-c', 'echo here > /tmp/moved']);
  const sinceLoss = await apis[1]!.call('GET', `/v1/checkpoints/${shippedCheckpoints[1]}/diff?to=live`);
  assert.equal(sinceLoss.status, 200, JSON.stringify(sinceLoss.body));
  assert.ok(
    sinceLoss.body.entries.some((e: { path: string; change: string }) => e.path === '/tmp/moved' && e.change === 'added'),
    JSON.stringify(sinceLoss.body.entries),
  );
  // A fork of a checkpoint the lost node held is placed on the other nodes, which fetch it from the object store.
  const forks = await apis[1]!.call('POST', `/v1/checkpoints/${shippedCheckpoints[0]}/fork`, { count: 2 });
  assert.equal(forks.status, 201, JSON.stringify(forks.body));
  for (const fork of forks.body.sessions as { id: string; nodeId: string }[]) {
    sessions.push(fork.id);
    assert.notEqual(fork.nodeId, victim);
    assert.equal((await apis[0]!.exec(fork.id, ['cat', '/tmp/kept'])).stdout, `kept-${mine[0]}\n`);
  }
  // Back, the node adopts its old sandboxes; the reply to its first heartbeat names the moved sessions, and it stops theirs before it counts as registered.
  await cluster.startNode(victim);
  const nodeUrl = (await apis[0]!.call('GET', '/v1/nodes')).body.nodes.find((n: { id: string }) => n.id === victim).url;
  const node = await nodeClientOf(cluster, victim, nodeUrl);
  const stillThere = (await node.listSandboxes()).filter((s) => mine.includes(s.sessionId));
  node.close();
  assert.deepEqual(stillThere, [], "the moved sessions' old sandboxes run on the node that came back");
  // What they wrote there after the shipped checkpoint is rescued into a checkpoint of each (by a maintenance pass), and the volume deleted there.
  for (const id of mine) {
    let rescue: { id: string } | undefined;
    for (const started = Date.now(); !rescue && Date.now() - started < 30_000; await pause(250))
      rescue = (await apis[0]!.call('GET', `/v1/sessions/${id}/checkpoints`)).body.checkpoints.find((c: { trigger: string }) => c.trigger === 'rescue');
    assert.ok(rescue, `no rescue checkpoint of ${id} within 30 s`);
    const fork = await apis[1]!.call('POST', `/v1/checkpoints/${rescue.id}/fork`, {});
    assert.equal(fork.status, 201, JSON.stringify(fork.body));
    sessions.push(fork.body.sessions[0].id);
    assert.equal(
      (await apis[0]!.exec(fork.body.sessions[0].id, ['cat', '/tmp/after'])).stdout,
      'after\n',
      'written on the lost node after the shipped checkpoint',
    );
  }
  assert.deepEqual(
    mine.filter((id) => existsSync(path.join(cluster.root, victim, 'btrfs', 'volumes', id))),
    [],
    'the volumes left there are deleted once rescued',
  );
  for (const id of mine) assert.equal((await apis[0]!.exec(id, ['cat', '/tmp/kept'])).stdout, `kept-${id}\n`);
});

/** Every file under `dir` (not following links). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(path.join(dir, e.name)) : e.isFile() ? [path.join(dir, e.name)] : [],
  );
}

/** The files (under `dir`) whose bytes hold `text`. */
function filesHolding(dir: string, text: string): string[] {
  return filesUnder(dir).filter((file) => readFileSync(file).includes(text));
}

test('a node agent SIGKILLed after a full checkpoint reached the object store (sealed: none of its bytes readable there): the session goes on on another node with its processes', async () => {
  const victim = 'node-2';
  const put = await apis[0]!.call('PUT', '/v1/secrets/SEALED_TOKEN', { value: `value-${process.pid}`, hosts: ['api.test.space'] });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  const placeholder: string = put.body.placeholder;
  const session = await sessionOn(victim, { secrets: ['SEALED_TOKEN'] });
  // A file of known bytes, and a process holding the secret's placeholder in its memory (its environment).
  const known = `SPACE-KNOWN-BYTES-${process.pid}-${Date.now()}`;
  const written = await apis[0]!.call('POST', `/v1/sessions/${session.id}/exec`, {
    cmd: ['sh', '-c', `for i in $(seq 100); do echo ${known}; done > /tmp/known.txt`],
  });
  assert.equal(written.body.exitCode, 0, JSON.stringify(written.body));
  const started = await apis[1]!.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: ['sleep', '100000'], background: true });
  assert.equal(started.status, 200, JSON.stringify(started.body));
  const full = await apis[0]!.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
  assert.equal(full.status, 201, JSON.stringify(full.body));
  await untilShipped(session.id);
  // On the node, unsealed, both are there (so the look into the store below can find them)...
  const image = path.join(
    execFileSync('find', [path.join(cluster.root, victim), '-maxdepth', '6', '-type', 'd', '-name', `${full.body.id}.memory`], { encoding: 'utf8' }).trim(),
  );
  assert.ok(filesHolding(image, placeholder).length > 0, `the node's memory image ${image} holds the placeholder`);
  // ...and in the object store's raw objects neither is.
  const objects = path.join(cluster.root, 'objects');
  assert.ok(
    filesUnder(objects).some((f) => f.includes(full.body.id)),
    'the checkpoint is in the store',
  );
  assert.deepEqual(filesHolding(objects, known), [], "no stored object holds the file's bytes");
  assert.deepEqual(filesHolding(objects, placeholder), [], "no stored object holds the secret's placeholder");
  cluster.member(victim)!.process.kill('SIGKILL');
  while ((await nodes(apis[0]!))[victim]?.status !== 'lost') await pause(100);
  // The first call moves it (each node has a data directory of its own: the memory image is restored under another path).
  const listed = await apis[1]!.call('GET', `/v1/sessions/${session.id}/processes`);
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  assert.ok(
    (listed.body.processes as { pid: number; running: boolean }[]).some((p) => p.pid === started.body.pid && p.running),
    `the background process runs on the new node: ${JSON.stringify(listed.body)}`,
  );
  const moved = (await apis[0]!.call('GET', `/v1/sessions/${session.id}`)).body;
  assert.notEqual(moved.nodeId, victim);
  assert.equal(moved.sandboxHistory.at(-1).restoredFrom, full.body.id, JSON.stringify(moved.sandboxHistory.at(-1)));
  const read = await apis[0]!.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: ['sh', '-c', 'head -1 /tmp/known.txt; echo "$SEALED_TOKEN"'] });
  assert.equal(read.body.stdout, `${known}\n${placeholder}\n`, 'opened on the new node: the file and the secret are back');
  await apis[0]!.call('DELETE', '/v1/secrets/SEALED_TOKEN');
  await cluster.startNode(victim);
  while ((await nodes(apis[1]!))[victim]?.status !== 'ready') await pause(200);
});

test("a session with a read-write volume survives its node's SIGKILL with the volume's files (shipped with its checkpoints), and takes it along when its new node is drained; back, the lost node keeps what it wrote there in a rescue checkpoint and drops its copy", async () => {
  const name = `moving-${process.pid}`;
  const made = await apis[0]!.call('POST', '/v1/volumes', { name, sizeGb: 1 });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const session = await apis[1]!.createSession({
    template: 'tiny',
    checkpointIntervalSec: 0,
    fullCheckpointIntervalSec: 0,
    volumes: [{ name, path: '/data' }],
  });
  sessions.push(session.id);
  const victim: string = session.nodeId;
  assert.equal(made.body.nodeId, victim, 'a session runs where its volumes are');
  await apis[0]!.exec(session.id, ['sh', '-c', 'echo in-the-volume > /data/kept; echo its-own > /tmp/own']);
  const checkpoint = await apis[0]!.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' });
  assert.equal(checkpoint.status, 201, JSON.stringify(checkpoint.body));
  await untilShipped(session.id);
  // The checkpoint's copy of the volume is an object of its own, sealed like the rest.
  const copy = filesUnder(path.join(cluster.root, 'objects')).find((f) => f.includes(`${checkpoint.body.id}.vol_`));
  assert.ok(copy, "the volume's copy is in the object store");
  const volumeId = /\.(vol_[a-z0-9]+)\.send/.exec(copy)![1]!;
  const copyOn = (node: string) => path.join(cluster.root, node, 'btrfs', 'named-volumes', volumeId);
  assert.ok(existsSync(copyOn(victim)), `the volume is at ${copyOn(victim)}`);
  await apis[0]!.exec(session.id, ['sh', '-c', 'echo after-the-checkpoint > /data/later']);

  cluster.member(victim)!.process.kill('SIGKILL');
  while ((await nodes(apis[0]!))[victim]?.status !== 'lost') await pause(100);
  const read = await apis[1]!.exec(session.id, ['sh', '-c', 'cat /data/kept /tmp/own; ls /data']);
  assert.equal(read.stdout, 'in-the-volume\nits-own\nkept\n', 'the volume as its checkpoint had it, on the new node');
  const moved = (await apis[0]!.call('GET', `/v1/sessions/${session.id}`)).body;
  assert.notEqual(moved.nodeId, victim);
  assert.equal((await apis[0]!.call('GET', `/v1/volumes/${name}`)).body.nodeId, moved.nodeId, 'the volume lives on the new node now');
  assert.equal((await apis[0]!.exec(session.id, ['sh', '-c', 'echo on-the-new-node > /data/new; cat /data/new'])).stdout, 'on-the-new-node\n');

  // Back, the lost node's copy (with what was written there after the checkpoint) is kept in a rescue checkpoint and deleted.
  await cluster.startNode(victim);
  while ((await nodes(apis[1]!))[victim]?.status !== 'ready') await pause(200);
  const deadline = Date.now() + 60_000;
  while (existsSync(copyOn(victim)) && Date.now() < deadline) await pause(500);
  assert.equal(existsSync(copyOn(victim)), false, "the lost node's copy of the volume is deleted once rescued");
  const rescue = (await apis[0]!.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints.find(
    (c: { trigger: string }) => c.trigger === 'rescue',
  );
  assert.ok(rescue, 'a rescue checkpoint holds what the lost node had');

  // Drained, its node lets it go with the volume, and the drained node keeps no copy.
  const from: string = moved.nodeId;
  const drained = await cli('node', 'drain', from);
  try {
    assert.deepEqual(drained.failed, []);
    const after = (await apis[0]!.call('GET', `/v1/sessions/${session.id}`)).body;
    assert.notEqual(after.nodeId ?? after.volumeNodeId, from);
    assert.equal((await apis[0]!.exec(session.id, ['sh', '-c', 'cat /data/kept /data/new'])).stdout, 'in-the-volume\non-the-new-node\n');
    const volume = (await apis[0]!.call('GET', `/v1/volumes/${name}`)).body;
    assert.notEqual(volume.nodeId, from);
    assert.equal(existsSync(copyOn(from)), false, 'the drained node keeps no copy');
  } finally {
    await cli('node', 'undrain', from);
  }
  assert.equal((await apis[0]!.call('DELETE', `/v1/sessions/${session.id}`)).status, 200);
  assert.equal((await apis[0]!.call('DELETE', `/v1/volumes/${name}`)).status, 200);
});

test('space node drain: every session of the node moves to the others with its files, a running one with its processes; the node takes none until undrained', async () => {
  const victim = 'node-1';
  const busy = await sessionOn(victim);
  const worker = (await apis[0]!.call('POST', `/v1/sessions/${busy.id}/exec`, { cmd: ['sleep', '100000'], background: true })).body;
  const before = await Promise.all(sessions.map(async (id) => ({ id, node: (await apis[0]!.call('GET', `/v1/sessions/${id}`)).body.nodeId as string })));
  const theirs = before.filter((s) => s.node === victim).map((s) => s.id);
  assert.ok(theirs.length > 0, 'the node holds sessions to move');
  const files = new Map<string, string>();
  for (const id of theirs) {
    await apis[1]!.exec(id, ['sh', '-c', `echo drained-${id} > /tmp/drain`]);
    files.set(id, `drained-${id}\n`);
  }
  const started = Date.now();
  const result = await cli('node', 'drain', victim).catch((err: Error) => {
    throw new Error(`${err.message}\nthe members' warnings and errors:\n${memberLines.filter((l) => /warn|error/i.test(l)).join('\n')}`);
  });
  console.log(`# drained ${result.moved.length} session(s) off ${victim} in ${Date.now() - started} ms`);
  for (const line of memberLines.filter((l) => l.includes('reading it again'))) console.log(`# ${line}`);
  assert.deepEqual(result.failed, []);
  assert.deepEqual(result.moved.map((m: { sessionId: string }) => m.sessionId).sort(), [...theirs].sort());
  const view = await nodes(apis[0]!);
  assert.deepEqual([view[victim]?.status, view[victim]?.sessions], ['draining', 0]);
  for (const id of theirs) {
    assert.equal((await apis[0]!.exec(id, ['cat', '/tmp/drain'])).stdout, files.get(id), 'every file written before the drain');
    assert.notEqual((await apis[0]!.call('GET', `/v1/sessions/${id}`)).body.nodeId, victim);
  }
  // The running one runs again on its new node, its process restored from the full checkpoint the drain took.
  const moved = (await apis[1]!.call('GET', `/v1/sessions/${busy.id}`)).body;
  assert.equal(moved.status, 'running');
  assert.match(
    moved.sandboxHistory.at(-1).note,
    new RegExp(`node ${victim} was drained: the session moved to node ${moved.nodeId} from ${moved.sandboxHistory.at(-1).restoredFrom}`),
  );
  const processes = (await apis[0]!.call('GET', `/v1/sessions/${busy.id}/processes`)).body.processes as { pid: number; running: boolean }[];
  assert.ok(
    processes.some((p) => p.pid === worker.pid && p.running),
    JSON.stringify(processes),
  );
  const fresh = await apis[0]!.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
  sessions.push(fresh.id);
  assert.notEqual(fresh.nodeId, victim, 'no new session on a draining node');
  assert.equal((await cli('node', 'undrain', victim)).status, 'ready');
});

test('nodes heartbeat with credentials of their own (scoped to their node, issued once per join token, revocable); node APIs serve control planes only (mutual TLS) and renew their certificates in place', async () => {
  const credentialOf = (name: string) => path.join(cluster.root, name, 'node', 'credential');
  for (const name of cluster.nodeNames) {
    assert.equal(statSync(credentialOf(name)).mode & 0o777, 0o600, `${name}'s credential is root's only`);
    assert.match(readFileSync(credentialOf(name), 'utf8'), /^snc_/);
  }
  assert.deepEqual(
    memberLines.filter((l) => /heartbeats with the admin key/.test(l)),
    [],
    'no node was given the admin key',
  );
  // Each node API is served over HTTPS with a certificate the cluster CA issued for that node, of a key that never left it.
  const clusterCa = new X509Certificate(readFileSync(path.join(cluster.clusterCaDir, 'ca.crt')));
  const view = await nodes(apis[0]!);
  for (const name of cluster.nodeNames) {
    assert.match(view[name]!.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    const certificate = new X509Certificate(readFileSync(path.join(cluster.root, name, 'node', 'tls.crt')));
    assert.ok(certificate.checkIssued(clusterCa) && certificate.subject === `CN=${name}`, certificate.subject);
    assert.equal(statSync(path.join(cluster.root, name, 'node', 'tls.key')).mode & 0o777, 0o600);
  }
  await assert.rejects(fetch(`${view['node-2']!.url.replace('https:', 'http:')}/health`), 'no plain HTTP on the node API');
  // Each node renewed its certificate after it started serving, and serves the renewed one: no restart.
  for (const name of cluster.nodeNames) {
    assert.ok(
      renewals.some((l) => l.includes(`of node ${name} for 127.0.0.1`)),
      `${name} renewed: ${renewals.join('\n')}`,
    );
    const { port } = new URL(view[name]!.url);
    const served = await new Promise<string>((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port: Number(port), ca: readFileSync(path.join(cluster.clusterCaDir, 'ca.crt')) }, () => {
        resolve(socket.getPeerCertificate().serialNumber);
        socket.destroy();
      }).once('error', reject);
    });
    assert.equal(served, new X509Certificate(readFileSync(path.join(cluster.root, name, 'node', 'tls.crt'))).serialNumber);
    assert.equal(existsSync(path.join(cluster.root, name, 'node', 'tls.key.new')), false);
  }
  // Mutual TLS: node-2's API takes a control plane's certificate of the cluster CA only, the node token notwithstanding.
  const pem = (name: string, file: string) => readFileSync(path.join(cluster.root, name, 'node', file), 'utf8');
  const ca = await ClusterCa.open(cluster.clusterCaDir);
  const asClient = async (identity?: { cert: string; key: string }) => {
    const client = new Upstream(view['node-2']!.url, pem('node-2', 'token').trim(), ErrorCode.NODE_UNAVAILABLE, 'node-2', 3000, {
      ca: ca.certificate,
      ...(identity ? { identity: () => identity } : {}),
    });
    try {
      return await client.json('GET', nodeRoutes.health.path, undefined, nodeRoutes.health.response);
    } finally {
      client.close();
    }
  };
  assert.equal((await asClient(await ca.issueControlPlaneCertificate(1))).nodeId, 'node-2');
  await assert.rejects(asClient(), { code: 'UNAUTHORIZED', message: /mutual TLS\): it presented no certificate/ });
  makeTestCertificates(path.join(cluster.root, 'foreign-ca'), ['127.0.0.1'], 'not the cluster CA');
  const foreignClient = makeTestClientCertificate(path.join(cluster.root, 'foreign-ca'), CONTROL_PLANE_CERTIFICATE_NAME);
  await assert.rejects(asClient({ cert: readFileSync(foreignClient.certFile, 'utf8'), key: readFileSync(foreignClient.keyFile, 'utf8') }), {
    code: 'UNAUTHORIZED',
    message: /its certificate is not of the CA this server takes/,
  });
  // Another node's certificate, though of the cluster CA, does not make a control plane.
  await assert.rejects(asClient({ cert: pem('node-1', 'tls.crt'), key: pem('node-1', 'tls.key') }), {
    code: 'UNAUTHORIZED',
    message: /its certificate is not one for clients \(INVALID_PURPOSE\)/,
  });
  assert.ok(
    memberLines.some((l) => l.startsWith('[node-2]') && /node API: refused a TLS client at 127\.0\.0\.1: .*it presented no certificate/.test(l)),
    'the node says why in its log',
  );
  // A node's credential reaches its own heartbeat only: no admin route, no tenant route, no other node's heartbeat.
  const asNode = new Api(cluster.controlPlaneUrls[0]!, readFileSync(credentialOf('node-1'), 'utf8').trim());
  assert.equal((await asNode.call('GET', '/v1/nodes')).status, 401);
  assert.equal((await asNode.call('POST', '/v1/sessions', { template: 'tiny' })).status, 401);
  const impostor = await asNode.call('POST', '/v1/nodes/heartbeat', {
    id: 'node-2',
    url: 'http://127.0.0.1:9',
    token: 'a-token-of-my-own-choosing',
    capacity: { memoryMb: 1024, cpus: 1 },
    sandboxes: 0,
  });
  assert.deepEqual([impostor.status, impostor.body.error.code], [403, 'FORBIDDEN']);
  assert.match(impostor.body.error.message, /node node-1's: it heartbeats for that node only, not node-2/);
  assert.equal((await nodes(apis[0]!))['node-2']?.url.includes(':9'), false, 'nothing of it was recorded');

  // A join token is used once.
  const { token } = await cli('node', 'join-token', '--ttl', '600');
  const keyless = new Api(cluster.controlPlaneUrls[1]!, null);
  assert.equal((await keyless.call('POST', '/v1/nodes/join', { nodeId: 'node-probe', joinToken: token })).status, 201);
  const twice = await keyless.call('POST', '/v1/nodes/join', { nodeId: 'node-probe-2', joinToken: token });
  assert.equal(twice.status, 401);
  assert.match(twice.body.error.message, /used by node node-probe at .*used once/);

  // Revoked, a node's heartbeats are refused (it says why), it is found lost; given a new join token, it is back.
  const victim = 'node-1';
  assert.deepEqual(await cli('node', 'revoke', victim), { nodeId: victim, revoked: true });
  const revokedAt = Date.now();
  while ((await nodes(apis[0]!))[victim]?.status !== 'lost') {
    assert.ok(Date.now() - revokedAt < 15_000, `${victim} not found lost within 15 s of its revocation`);
    await pause(200);
  }
  console.log(`# ${victim} found lost ${Date.now() - revokedAt} ms after its credential was revoked (lost after 3 s)`);
  assert.ok(
    memberLines.some((l) => l.startsWith(`[${victim}]`) && /credential of node node-1 was revoked/.test(l)),
    "the node's log says why it is refused",
  );
  await cluster.stopMember(victim);
  rmSync(credentialOf(victim));
  await cluster.startNode(victim);
  while ((await nodes(apis[1]!))[victim]?.status !== 'ready') await pause(200);
  assert.match(readFileSync(credentialOf(victim), 'utf8'), /^snc_/);
});

test("a node refuses a call naming an older placement of a session than the newest it has seen: a stalled control plane's calls do nothing there", async () => {
  const session = await apis[0]!.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
  sessions.push(session.id);
  // Created: placement 1. Its sandbox killed, the next call resumes it: placement 2.
  assert.equal((await apis[1]!.call('POST', `/v1/sessions/${session.id}/sandbox/kill`)).status, 200);
  assert.equal((await apis[1]!.exec(session.id, ['true'])).exitCode, 0);
  const { sandbox } = (await apis[0]!.call('GET', `/v1/sessions/${session.id}`)).body as { sandbox: { id: string } };
  const node = await nodeClientOf(cluster, session.nodeId, (await nodes(apis[0]!))[session.nodeId]!.url);
  try {
    await assert.rejects(node.placedAt({ sessionId: session.id, epoch: 1 }).sandboxInfo(sandbox.id), { code: 'PLACEMENT_STALE', status: 409 });
    await assert.rejects(node.placedAt({ sessionId: session.id, epoch: 1 }).stopSandbox(sandbox.id), { code: 'PLACEMENT_STALE' });
    assert.equal((await node.placedAt({ sessionId: session.id, epoch: 2 }).sandboxInfo(sandbox.id)).running, true);
  } finally {
    node.close();
  }
  assert.equal((await apis[0]!.exec(session.id, ['true'])).exitCode, 0, 'the stale stop did nothing');
});

test("usage metering goes on through a control plane's SIGKILL: a known CPU load is counted once, without a gap", { timeout: 300_000 }, async () => {
  const session = await sessionOn('node-1');
  const survivor = apis[1]!;
  const metered = async () => (await survivor.call('GET', `/v1/usage?groupBy=session&sessionId=${session.id}`)).body.rows[0]?.cpuSeconds ?? 0;
  const first = await cpuLoad(survivor, session.id, 2);
  cluster.member('control-plane-1')!.process.kill('SIGKILL');
  const second = await cpuLoad(survivor, session.id, 2);
  const killedAt = Date.now();
  // The survivor takes the dead one's share of the nodes (and their usage) once it stops beating in the roster.
  while ((await metered()) < first + second) {
    assert.ok(Date.now() - killedAt < 120_000, `metered ${await metered()} s of ${first + second} s within 120 s`);
    await pause(500);
  }
  const cpu = await metered();
  console.log(`# ${cpu} s metered for ${first + second} s of load across a control plane's SIGKILL (${Date.now() - killedAt} ms after it)`);
  assert.ok(cpu <= first + second + 3, `counted once: ${cpu} s for ${first + second} s`);
  await cluster.startControlPlane(0);
  assert.equal((await apis[0]!.call('GET', '/healthz')).status, 200);
});
