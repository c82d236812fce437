import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { closeServer } from '@space/server-kit';
import type { NodeClient } from './node-client.js';
import { NodeDirectory } from './node-directory.js';
import { SecretCipher } from '../store/secret-cipher.js';
import { openSqliteStore } from '../store/open-store.js';
import type { SessionRow } from '../store/store.js';

async function cluster(options: { allowPlainNodeApi?: boolean } = {}) {
  const clock = { now: Date.parse('2026-11-30T12:00:00.000Z') };
  const store = await openSqliteStore(':memory:');
  await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
  const connected: string[] = [];
  const nodes = new NodeDirectory({
    store,
    cipher: new SecretCipher(randomBytes(32)),
    lostAfterMs: 10_000,
    ...options,
    now: () => clock.now,
    connect: (id, url, token) => {
      connected.push(`${id} ${url} ${token}`);
      return { nodeId: id, close: () => undefined, failedConnections: () => 0 } as unknown as NodeClient;
    },
  });
  const beat = (id: string, memoryMb = 4096, storage?: 'low' | 'read-only') =>
    nodes.heartbeat({
      id,
      url: `https://${id}.invalid:7071`,
      token: `token-of-${id}-0000`,
      capacity: { memoryMb, cpus: 2 },
      sandboxes: 0,
      ...(storage ? { storage } : {}),
    });
  let n = 0;
  /** A running session whose volume is on `nodeId`, as placement counts them. */
  const sessionOn = (nodeId: string) =>
    store.insertSession({
      id: `ses_${n++}`,
      tenantId: 'tn_a',
      template: 'tiny',
      status: 'running',
      createdAt: new Date(clock.now).toISOString(),
      env: {},
      resources: { memoryMb: 512, cpus: 1, pids: 256 },
      metadata: {},
      sandboxId: null,
      nodeId,
      sandboxStartedAt: null,
      parentCheckpointId: null,
      checkpointIntervalSec: 60,
      fullCheckpointIntervalSec: 600,
      idleTimeoutSec: 900,
      onResume: 'processes',
      resumeNote: null,
      expiresAt: null,
      onTimeout: 'delete',
      services: [],
      volumes: [],
      publicPorts: [],
      cwd: null,
      codeCheckpointDelayMs: 1000,
      placementEpoch: 0,
      lastActiveAt: null,
      volumeNodeId: nodeId,
      secrets: [],
      egress: { mode: 'allow-all', domains: [], cidrs: [] },
    } satisfies SessionRow);
  return { clock, store, nodes, beat, sessionOn, connected };
}

test('new sessions go to the ready node with the fewest active sessions for its memory', async () => {
  const c = await cluster();
  await assert.rejects(c.nodes.place(), { code: 'NODE_UNAVAILABLE', message: /no node is ready \(0 registered/ });
  await c.beat('node_a');
  await c.beat('node_b', 8192);
  const placed: string[] = [];
  for (let i = 0; i < 6; i++) {
    const node = await c.nodes.place();
    placed.push(node.nodeId);
    await c.sessionOn(node.nodeId);
  }
  // node_b has twice the memory: it takes two sessions for each of node_a's.
  assert.deepEqual([placed.filter((p) => p === 'node_a').length, placed.filter((p) => p === 'node_b').length], [2, 4]);
  const view = await c.nodes.list();
  assert.deepEqual(
    view.map((v) => [v.id, v.status, v.sessions]),
    [
      ['node_a', 'ready', 2],
      ['node_b', 'ready', 4],
    ],
  );
  assert.equal(c.connected[0], 'node_a https://node_a.invalid:7071 token-of-node_a-0000', 'the token is stored sealed and opened for the client');
});

test('a node whose heartbeat says its storage is low or read-only gets no new sessions, whatever its load; the refusal names it', async () => {
  const c = await cluster();
  await c.beat('node_a', 4096, 'low');
  await c.beat('node_b');
  for (let i = 0; i < 3; i++) await c.sessionOn('node_b');
  assert.equal((await c.nodes.place()).nodeId, 'node_b', 'the emptier node is low');
  await c.beat('node_a');
  await c.beat('node_b', 4096, 'read-only');
  // Placement reads the nodes at most once a second.
  c.clock.now += 1100;
  assert.equal((await c.nodes.place()).nodeId, 'node_a');
  assert.deepEqual(
    (await c.nodes.list()).map((v) => [v.id, v.status, v.storage]),
    [
      ['node_a', 'ready', 'ok'],
      ['node_b', 'ready', 'read-only'],
    ],
  );
  await c.beat('node_a', 4096, 'low');
  c.clock.now += 1100;
  await assert.rejects(c.nodes.place(), { code: 'NODE_UNAVAILABLE', message: /node_a ready \(storage low\), node_b ready \(storage read-only\)/ });
});

test('a node without heartbeats is lost; a draining one takes no new sessions; a session bound to a lost node is refused clearly', async () => {
  const c = await cluster();
  await c.beat('node_a');
  await c.beat('node_b');
  await c.nodes.setStatus('node_b', 'draining');
  assert.equal((await c.nodes.place()).nodeId, 'node_a');
  c.clock.now += 11_000;
  await c.beat('node_b');
  assert.deepEqual(
    (await c.nodes.list()).map((v) => [v.id, v.status]),
    [
      ['node_a', 'lost'],
      ['node_b', 'draining'],
    ],
    'a heartbeat keeps the status an operator set',
  );
  await c.beat('node_c');
  assert.deepEqual(await c.nodes.countByStatus(), { ready: 1, draining: 1, lost: 1 }, 'counted as listed (for /metrics, without reading the sessions)');
  c.clock.now += 11_000;
  await c.beat('node_b');
  await assert.rejects(c.nodes.place(), { code: 'NODE_UNAVAILABLE', message: /node_a lost, node_b draining/ });
  await assert.rejects(c.nodes.place('node_a'), { code: 'NODE_UNAVAILABLE', message: /node node_a, which holds what the session starts from, is lost/ });
  assert.equal((await c.nodes.place('node_b')).nodeId, 'node_b', 'a fork goes where its checkpoint is, draining or not');
  assert.deepEqual(
    (await c.nodes.live()).map((n) => n.nodeId),
    ['node_b'],
  );
  await assert.rejects(c.nodes.client('node_x'), { code: 'NODE_UNAVAILABLE', message: /node node_x is not registered/ });
  await assert.rejects(c.nodes.setStatus('node_x', 'draining'), { code: 'NODE_NOT_FOUND' });
});

test('sessions and templates from before nodes were recorded belong to the configured node', async () => {
  const c = await cluster();
  await c.sessionOn('node_a');
  await c.store.updateSession('ses_0', { volumeNodeId: null });
  await c.store.insertTemplateVersion({ id: 'tpl_old', tenantId: 'tn_a', name: 'old', fromCheckpoint: 'ckp_x', nodeId: null, createdAt: '', config: null });
  await c.store.adoptUnplaced('node_local');
  assert.equal((await c.store.getSession('tn_a', 'ses_0'))?.volumeNodeId, 'node_local');
  assert.equal((await c.store.listTemplates('tn_a'))[0]?.nodeId, 'node_local');
});

test('a joining node is told which of the sessions it runs moved to another node or were deleted; a plain heartbeat is told nothing', async () => {
  const { nodes, store, sessionOn } = await cluster();
  await sessionOn('node-1'); // ses_0 stayed
  await sessionOn('node-2'); // ses_1 moved to node-2 while node-1 was away
  const joining = { id: 'node-1', url: 'https://node-1.invalid:7071', token: 'token-of-node-1-0000', capacity: { memoryMb: 4096, cpus: 2 }, sandboxes: 3 };
  assert.deepEqual(await nodes.heartbeat({ ...joining, sessions: ['ses_0', 'ses_1', 'ses_gone'] }), { ok: true, stop: ['ses_1', 'ses_gone'] });
  assert.deepEqual(await nodes.heartbeat(joining), { ok: true, stop: [] });
  // Rows from before nodes were recorded run wherever they run.
  await store.updateSession('ses_0', { volumeNodeId: null });
  assert.deepEqual((await nodes.heartbeat({ ...joining, id: 'node-3', sessions: ['ses_0'] })).stop, []);
});

test("a moved session's copy on a node heard again is recorded as it really ended: at the node's fence, or when heard again if it did not fence", async () => {
  const { nodes, store, sessionOn, clock } = await cluster();
  await sessionOn('node-2'); // ses_0 and ses_1 moved to node-2 while node-1 was cut off
  await sessionOn('node-2');
  for (const sessionId of ['ses_0', 'ses_1']) {
    const sandbox = (id: string, nodeId: string) => ({
      id,
      sessionId,
      nodeId,
      startedAt: '2026-11-30T11:00:00.000Z',
      endedAt: null,
      endReason: null,
      restoredFrom: null,
      note: null,
    });
    await store.recordPlacedStart(0, { status: 'running' }, sandbox(`sbx_${sessionId}`, 'node-1'));
    await store.recordSandboxEnd(`sbx_${sessionId}`, 'lost');
  }
  const joining = { id: 'node-1', url: 'https://node-1.invalid:7071', token: 'token-of-node-1-0000', capacity: { memoryMb: 4096, cpus: 2 }, sandboxes: 2 };
  await nodes.heartbeat({ ...joining, sessions: ['ses_0'], fencedSince: '2026-11-30T11:59:00.000Z' });
  await nodes.heartbeat({ ...joining, sessions: ['ses_1'] });
  const ended = async (sessionId: string) => (await store.listSandboxHistory(sessionId)).map((h) => [h.endedAt, h.endReason, h.note]);
  assert.deepEqual(await ended('ses_0'), [
    [
      '2026-11-30T11:59:00.000Z',
      'fenced',
      `cut off from every control plane, paused by its node's fence at 2026-11-30T11:59:00.000Z and stopped at ${new Date(clock.now).toISOString()} when the node was heard again`,
    ],
  ]);
  assert.deepEqual(await ended('ses_1'), [
    [
      new Date(clock.now).toISOString(),
      'cut-off',
      `cut off from every control plane, it ran on until its node was heard again at ${new Date(clock.now).toISOString()}`,
    ],
  ]);
});

test('a node API over plain HTTP is taken on loopback only, unless SPACE_ALLOW_PLAIN_NODE_API', async () => {
  const beat = (url: string) => ({ id: 'node-1', url, token: 'token-of-node-1-0000', capacity: { memoryMb: 4096, cpus: 2 }, sandboxes: 0 });
  const strict = await cluster();
  for (const url of ['http://127.0.0.1:7071', 'http://localhost:7071', 'http://[::1]:7071', 'https://10.0.0.5:7071'])
    assert.deepEqual(await strict.nodes.heartbeat(beat(url)), { ok: true, stop: [] }, url);
  for (const url of ['http://10.0.0.5:7071', 'http://node-1.internal:7071', 'http://[fd00::5]:7071'])
    await assert.rejects(strict.nodes.heartbeat(beat(url)), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'VALIDATION_FAILED');
      assert.match(
        err.message,
        /^node node-1: the node API at http:\S+ is plain HTTP on a network address .*SPACE_CLUSTER_CA_DIR.*SPACE_ALLOW_PLAIN_NODE_API=1/,
      );
      return true;
    });
  assert.equal((await strict.store.getNode('node-1'))?.url, 'https://10.0.0.5:7071', 'nothing of a refused one recorded');
  const allowing = await cluster({ allowPlainNodeApi: true });
  assert.deepEqual(await allowing.nodes.heartbeat(beat('http://10.0.0.5:7071')), { ok: true, stop: [] });
});

test('calls waiting on a node found lost end with NODE_UNAVAILABLE (a frozen node never answers them); those on a live or the configured node wait on', async () => {
  // Accepts every request and answers none: a node whose process is frozen.
  const frozen = createServer(() => undefined);
  await new Promise<void>((resolve) => frozen.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(frozen.address() as AddressInfo).port}`;
  const clock = { now: Date.parse('2026-11-30T12:00:00.000Z') };
  const nodes = new NodeDirectory({
    store: await openSqliteStore(':memory:'),
    cipher: new SecretCipher(randomBytes(32)),
    lostAfterMs: 10_000,
    now: () => clock.now,
  });
  const beat = (id: string) => nodes.heartbeat({ id, url, token: `token-of-${id}-0000`, capacity: { memoryMb: 4096, cpus: 2 }, sandboxes: 0 });
  try {
    for (const id of ['n1', 'n2', 'n3']) await beat(id);
    nodes.setConfiguredNode('n3');
    const [n1, n2, n3] = await Promise.all(['n1', 'n2', 'n3'].map((id) => nodes.client(id)));
    const stopping = n1!.placedAt({ sessionId: 'ses_1', epoch: 1 }).stopSandbox('sbx_1');
    stopping.catch(() => undefined);
    for (const call of [n2!.checkpoint('ses_2', 'ckp_2', 'fs'), n3!.stopSandbox('sbx_3')]) call.catch(() => undefined);
    while (n1!.waitingCalls() + n2!.waitingCalls() + n3!.waitingCalls() < 3) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(await nodes.cutCallsToLost(), new Map(), 'no node is lost yet');

    clock.now += 11_000;
    await beat('n2');
    assert.deepEqual(await nodes.cutCallsToLost(60_000), new Map(), 'no node has been silent for a minute: none looked at');
    assert.deepEqual([...(await nodes.cutCallsToLost())], [['n1', 1]]);
    await assert.rejects(stopping, {
      code: 'NODE_UNAVAILABLE',
      message: 'node n1 was found lost (no heartbeat for 11 s) while this call waited for its answer',
    });
    assert.equal(n2!.waitingCalls(), 1, "the live node's call waits on");
    assert.equal(n3!.waitingCalls(), 1, "the configured node's call waits on (this process beats for it)");
    assert.deepEqual(await nodes.cutCallsToLost(), new Map(), 'nothing more to end');
    n2!.cutWaiting('end of test');
    n3!.cutWaiting('end of test');
  } finally {
    nodes.close();
    await closeServer(frozen);
  }
});

test('a node restarted on a new address is reached there at once: by the control plane it beat to, and by one whose call to the old address failed', async () => {
  // The node's first address: a port nothing listens on any more.
  const gone = createServer();
  await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
  const goneUrl = `http://127.0.0.1:${(gone.address() as AddressInfo).port}`;
  await closeServer(gone);
  const asked: string[] = [];
  const restarted = createServer((req, res) => {
    asked.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => restarted.listen(0, '127.0.0.1', resolve));
  // Two control planes on one store; the clock does not move, so every client's row stays as fresh as when it was read.
  const store = await openSqliteStore(':memory:');
  const cipher = new SecretCipher(randomBytes(32));
  const [beaten, other] = [0, 1].map(() => new NodeDirectory({ store, cipher, lostAfterMs: 10_000, now: () => Date.parse('2026-11-30T12:00:00.000Z') }));
  const beat = (url: string) => beaten!.heartbeat({ id: 'n1', url, token: 'token-of-n1-0000', capacity: { memoryMb: 4096, cpus: 2 }, sandboxes: 0 });
  try {
    await beat(goneUrl);
    const before = await beaten!.client('n1');
    await assert.rejects((await other!.client('n1')).stopSandbox('sbx_1'), { code: 'NODE_UNAVAILABLE', message: /unreachable: connect ECONNREFUSED/ });
    await beat(`http://127.0.0.1:${(restarted.address() as AddressInfo).port}`);
    for (const nodes of [beaten!, other!]) {
      const client = await nodes.client('n1');
      await client.stopSandbox('sbx_1').catch(() => undefined);
    }
    assert.notEqual(await beaten!.client('n1'), before, 'a new client');
    assert.deepEqual(asked, ['DELETE /node/v1/sandboxes/sbx_1', 'DELETE /node/v1/sandboxes/sbx_1'], 'both calls went to the new address');
  } finally {
    for (const nodes of [beaten!, other!]) nodes.close();
    await closeServer(restarted);
  }
});
