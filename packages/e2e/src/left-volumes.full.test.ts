import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import type { LocalCluster } from '@space/cli';
import { Api } from './client.js';
import { smallCluster } from './harness/small-cluster.js';
import { cliMain, testDataDir } from './platform.js';

// A cluster of its own (PostgreSQL, two control planes, three nodes) whose maintenance passes never
// come round during the test: what a session left on a lost node can then be kept only by the move.
const run = promisify(execFile);
const adminKey = `left-volumes-test-${process.pid}-${Date.now()}`;
let cluster: LocalCluster;
let api: Api;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function nodeStatus(nodeId: string): Promise<string | undefined> {
  const reply = await api.call('GET', '/v1/nodes');
  return (reply.body.nodes as { id: string; status: string }[]).find((n) => n.id === nodeId)?.status;
}

/** `space node <verb> <node> --json` (not execFileSync: the loopback S3 server runs in this process). */
async function cli(...args: string[]): Promise<any> {
  const env = { ...process.env, SPACE_API_URL: cluster.controlPlaneUrls.join(','), SPACE_API_KEY: adminKey };
  return JSON.parse((await run(process.execPath, [cliMain, ...args, '--json'], { env })).stdout);
}

before(async () => {
  cluster = await smallCluster({ dataDir: `${testDataDir}-left-volumes`, adminKey, env: { SPACE_MAINTENANCE_TICK_MS: '3600000' } });
  await cluster.start();
  api = new Api(cluster.controlPlaneUrls[0]!, adminKey);
});

after(async () => {
  await cluster?.stop();
  const mounts = execFileSync('mount', { encoding: 'utf8' });
  assert.ok(!mounts.includes(`${cluster.root}/`), `a node's storage is still mounted:\n${mounts}`);
});

test('a session moved back onto the node it was lost from: what it wrote there after its shipped checkpoint is kept in a rescue checkpoint, not overwritten', {
  timeout: 180_000,
}, async () => {
  const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
  const first = session.nodeId as string;
  await api.exec(session.id, ['sh', '-c', 'echo kept > /tmp/kept']);
  const shipped = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' });
  assert.equal(shipped.status, 201, JSON.stringify(shipped.body));
  while (!(await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints.every((c: { shippedAt: string | null }) => c.shippedAt))
    await pause(100);
  await api.exec(session.id, ['sh', '-c', 'echo after > /tmp/after']);

  // Its node is lost: the session goes on elsewhere from the shipped checkpoint; /tmp/after stays behind.
  cluster.member(first)!.process.kill('SIGKILL');
  while ((await nodeStatus(first)) !== 'lost') await pause(100);
  assert.equal((await api.exec(session.id, ['sh', '-c', 'cat /tmp/after || echo gone'])).stdout, 'gone\n');
  const second = (await api.call('GET', `/v1/sessions/${session.id}`)).body.nodeId as string;
  assert.notEqual(second, first);
  const third = cluster.nodeNames.find((n) => n !== first && n !== second)!;
  assert.deepEqual((await cli('node', 'drain', third)).failed, []);

  // The lost node comes back and, before any maintenance pass, is the only place the session can go.
  await cluster.startNode(first);
  while ((await nodeStatus(first)) !== 'ready') await pause(200);
  const drained = await cli('node', 'drain', second);
  assert.deepEqual(drained.failed, []);
  assert.equal((await api.call('GET', `/v1/sessions/${session.id}`)).body.nodeId, first);
  assert.equal((await api.exec(session.id, ['cat', '/tmp/kept'])).stdout, 'kept\n');

  const rescue = (await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints.find((c: { trigger: string }) => c.trigger === 'rescue');
  assert.ok(rescue, 'what the session wrote on the lost node is kept in a rescue checkpoint');
  const fork = await api.call('POST', `/v1/checkpoints/${rescue.id}/fork`, {});
  assert.equal(fork.status, 201, JSON.stringify(fork.body));
  assert.equal((await api.exec(fork.body.sessions[0].id, ['cat', '/tmp/after'])).stdout, 'after\n');

  for (const node of [second, third]) assert.equal((await cli('node', 'undrain', node)).status, 'ready');
  for (const id of [session.id, fork.body.sessions[0].id]) await api.call('DELETE', `/v1/sessions/${id}`);
});
