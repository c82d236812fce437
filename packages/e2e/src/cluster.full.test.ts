import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { after, before, test } from 'node:test';
import { LocalCluster } from '@space/cli';
import { Api } from './client.js';
import { testDataDir } from './platform.js';

// `space cluster up` in a test: one PostgreSQL, two control planes and three node agents on this
// machine, each node with its own data directory, btrfs image and sandboxes.
const adminKey = `cluster-test-${process.pid}-${Date.now()}`;
let cluster: LocalCluster;
let apis: Api[];
const sessions: string[] = [];

/** A port with the next one free too: the control planes listen on consecutive ports. */
async function twoFreePorts(): Promise<number> {
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = createServer()
        .once('error', () => resolve(false))
        .listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
  for (let port = 20_000 + Math.floor(Math.random() * 20_000); ; port += 2) if ((await free(port)) && (await free(port + 1))) return port;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function nodes(api: Api): Promise<Record<string, { status: string; sessions: number }>> {
  const reply = await api.call('GET', '/v1/nodes');
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  return Object.fromEntries((reply.body.nodes as { id: string; status: string; sessions: number }[]).map((n) => [n.id, n]));
}

before(async () => {
  cluster = new LocalCluster({
    dataDir: testDataDir,
    nodes: 3,
    controlPlanes: 2,
    port: await twoFreePorts(),
    adminKey,
    env: {
      SPACE_TEMPLATES: 'tiny',
      SPACE_POOL_SIZE: '0',
      SPACE_TEMPLATE_IMAGES: '0',
      SPACE_VOLUME_SIZE_GB: '8',
      SPACE_HEARTBEAT_MS: '500',
      SPACE_NODE_LOST_AFTER_SEC: '3',
      SPACE_QUIET: '1',
    },
  });
  await cluster.start();
  apis = cluster.controlPlaneUrls.map((url) => new Api(url, adminKey));
});

after(async () => {
  for (const id of sessions) await apis?.[0]?.call('DELETE', `/v1/sessions/${id}`);
  await cluster?.stop();
  const mounts = execFileSync('mount', { encoding: 'utf8' });
  assert.ok(!mounts.includes(`${cluster.root}/`), `a node's storage is still mounted:\n${mounts}`);
});

test('sessions are spread over the nodes and served through either control plane', async () => {
  for (let i = 0; i < 6; i++) {
    const session = await apis[i % 2]!.createSession({ template: 'tiny' });
    sessions.push(session.id);
    await apis[(i + 1) % 2]!.exec(session.id, ['sh', '-c', `echo ${session.id} > /tmp/who`]);
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
    const session = await apis[i % 2]!.createSession({ template: 'tiny' });
    sessions.push(session.id);
    assert.notEqual(session.nodeId, victim, 'no new session on a lost node');
  }
  await cluster.startNode(victim);
  while ((await nodes(apis[1]!))[victim]?.status !== 'ready') await pause(200);
  for (const { id } of placed.filter((p) => p.node === victim)) assert.equal((await apis[0]!.exec(id, ['cat', '/tmp/who'])).stdout, `${id}\n`);
});
