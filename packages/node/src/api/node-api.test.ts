import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WebSocket } from 'ws';
import { CALL_TIMEOUT_HEADER, PLACEMENT_HEADER, nodeRouteTable, nodeRoutes, routeUrl } from '@space/protocol';
import { closeServer, lineLog, listen } from '@space/server-kit';
import { type NodeApiDeps, createNodeApi } from './node-api.js';
import { NodeFence } from '../node-fence.js';
import { PlacementEpochs } from '../placement-epochs.js';

/** A value for each kind of path segment the node's routes take. */
const sample: Record<string, string> = {
  sandboxId: 'sbx_abc123',
  sessionId: 'ses_abc123',
  checkpointId: 'ckp_abc123',
  baseId: 'bse_abc123',
  templateId: 'tpl_abcdefabcdef',
  volumeId: 'vol_abcdefabcdef',
  snapshotId: 'vsn_abcdefabcdef',
  name: 'web',
  pid: '42',
  port: '8080',
  '*': 'index.html',
};

const fill = (path: string): string => path.replace(/:([a-zA-Z]+)/g, (_, n: string) => sample[n]!).replace(/\*$/, sample['*']!);

/** The status a WebSocket upgrade with a wrong token is refused with. */
function upgradeRefusal(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: 'Bearer wrong' } });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('open', () => reject(new Error(`${url} accepted a wrong token`)));
    ws.once('error', () => undefined);
  });
}

// Nothing behind the API: a request that got past the token and the checks would fail with a 500.
async function nodeApi(fence = unfenced(), placements = PlacementEpochs.inMemory()): Promise<{ url: string; close(): Promise<void> }> {
  const router = createNodeApi({ nodeId: 'n1', token: 'right', fence, placements, log: lineLog(() => undefined) } as unknown as NodeApiDeps);
  const { server, port } = await listen(router, '127.0.0.1', 0);
  return { url: `http://127.0.0.1:${port}`, close: () => closeServer(server) };
}

function unfenced(sandboxIds: () => string[] = () => [], calls: string[] = []): NodeFence {
  return new NodeFence({
    sandboxIds,
    pause: async (id) => void calls.push(`pause ${id}`),
    resume: async (id) => void calls.push(`resume ${id}`),
    gateway: { setFenced: (on) => void calls.push(`gateway ${on ? 'fenced' : 'open'}`) },
    log: { info: () => undefined, warn: () => undefined, error: () => undefined },
  });
}

test('fenced, the node pauses each sandbox once (one started meanwhile too), refuses calls but its health; lifted, it resumes those still there', async () => {
  const live = ['sbx_a', 'sbx_b'];
  const calls: string[] = [];
  const fence = unfenced(() => live, calls);
  const api = await nodeApi(fence);
  try {
    await fence.fence();
    live.push('sbx_c');
    await fence.fence();
    assert.deepEqual(calls, ['gateway fenced', 'pause sbx_a', 'pause sbx_b', 'pause sbx_c']);
    const res = await fetch(api.url + routeUrl(nodeRoutes.sandboxInfo, { sandboxId: 'sbx_a' }), { headers: { authorization: 'Bearer right' } });
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(res.status, 503);
    assert.equal(body.error.code, 'NODE_UNAVAILABLE');
    assert.match(body.error.message, /fenced/);
    // Health is answered by its handler (which has nothing behind it here), not refused by the fence.
    const health = await fetch(api.url + routeUrl(nodeRoutes.health), { headers: { authorization: 'Bearer right' } });
    assert.notEqual(((await health.json()) as { error?: { code: string } }).error?.code, 'NODE_UNAVAILABLE');
    live.splice(live.indexOf('sbx_b'), 1); // stopped: its session moved away
    await fence.lift();
    assert.deepEqual(calls.slice(4), ['resume sbx_a', 'resume sbx_c', 'gateway open']);
    assert.equal(fence.fenced, false);
  } finally {
    await api.close();
  }
});

test('the node serves every route of its table, and each wants the node token', async () => {
  const api = await nodeApi();
  try {
    for (const route of nodeRouteTable) {
      if (route.websocket) {
        assert.equal(await upgradeRefusal(api.url.replace('http', 'ws') + fill(route.path)), 401, `${route.method} ${route.path}`);
        continue;
      }
      const method = route.method === 'ANY' ? 'GET' : route.method;
      const res = await fetch(api.url + fill(route.path), { method, headers: { authorization: 'Bearer wrong' } });
      const body = (await res.json()) as { error?: { code?: string } };
      assert.deepEqual([res.status, body.error?.code], [401, 'UNAUTHORIZED'], `${route.method} ${route.path}`);
    }
  } finally {
    await api.close();
  }
});

test("the node checks a route's params, body and query with the table's schemas before it acts", async () => {
  const api = await nodeApi();
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(api.url + path, {
      method,
      headers: { authorization: 'Bearer right', 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return [res.status, ((await res.json()) as { error: { code: string; message: string } }).error];
  };
  try {
    const [status, error] = await call('DELETE', '/node/v1/volumes/ses_UPPER');
    assert.equal(status, 400);
    assert.match((error as { message: string }).message, /invalid session id/);
    assert.equal((await call('DELETE', routeUrl(nodeRoutes.deleteBase, { baseId: 'ckp_abc123' })))[0], 400);
    assert.equal((await call('POST', routeUrl(nodeRoutes.deleteBases), { baseIds: ['ckp_abc123'] }))[0], 400);
    assert.equal((await call('POST', routeUrl(nodeRoutes.deleteBases), { baseIds: [] }))[0], 400);
    assert.equal((await call('DELETE', routeUrl(nodeRoutes.stopService, { sandboxId: 'sbx_1', name: 'Web' })))[0], 400);
    assert.equal((await call('POST', routeUrl(nodeRoutes.createBase), { baseId: 'bse_abc123' }))[0], 400);
    assert.equal((await call('GET', routeUrl(nodeRoutes.volumeChanged, { sessionId: 'ses_abc123' }, { since: 'nope' })))[0], 400);
    assert.equal((await call('GET', routeUrl(nodeRoutes.egressAudit, { sessionId: 'ses_abc123' }, { limit: 0 })))[0], 400);
  } finally {
    await api.close();
  }
});

test('a call naming an older placement of its session than the newest the node has seen is refused before it acts; a malformed one too', async () => {
  const placements = PlacementEpochs.inMemory();
  const api = await nodeApi(unfenced(), placements);
  const call = async (placement?: string) => {
    const headers: Record<string, string> = { authorization: 'Bearer right', ...(placement === undefined ? {} : { [PLACEMENT_HEADER]: placement }) };
    const res = await fetch(api.url + routeUrl(nodeRoutes.sandboxInfo, { sandboxId: 'sbx_abc123' }), { headers });
    return [res.status, ((await res.json()) as { error: { code: string } }).error.code];
  };
  try {
    // Admitted calls reach their handler, which has nothing behind it here (500).
    assert.deepEqual(await call('ses_abc123 3'), [500, 'INTERNAL']);
    assert.equal(placements.epochOf('ses_abc123'), 3);
    assert.deepEqual(await call('ses_abc123 2'), [409, 'PLACEMENT_STALE']);
    assert.deepEqual(await call('ses_abc123 3'), [500, 'INTERNAL']);
    assert.deepEqual(await call('ses_other 1'), [500, 'INTERNAL'], 'another session has its own epochs');
    assert.deepEqual(await call(), [500, 'INTERNAL'], 'a call naming none, as from an older control plane');
    assert.deepEqual(await call('ses_abc123 two'), [400, 'VALIDATION_FAILED']);
    assert.equal(placements.epochOf('ses_abc123'), 3);
  } finally {
    await api.close();
  }
});

test("a sandbox call that waited on the node past its caller's budget (x-space-timeout-ms) is dropped there, unrun; one within it goes on", async () => {
  // The sandbox is behind a full checkpoint's pause for 300 ms; its daemon is nothing (a call that reaches it fails with a 500).
  const manager = { getAlive: () => new Promise((resolve) => setTimeout(() => resolve({ daemon: {} }), 300)) };
  const router = createNodeApi({
    nodeId: 'n1',
    token: 'right',
    fence: unfenced(),
    placements: PlacementEpochs.inMemory(),
    manager,
    log: lineLog(() => undefined),
  } as unknown as NodeApiDeps);
  const { server, port } = await listen(router, '127.0.0.1', 0);
  const processes = async (timeoutMs?: number) => {
    const headers: Record<string, string> = { authorization: 'Bearer right', ...(timeoutMs ? { [CALL_TIMEOUT_HEADER]: String(timeoutMs) } : {}) };
    const res = await fetch(`http://127.0.0.1:${port}/node/v1/sandboxes/sbx_abc123/processes`, { headers });
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    return [res.status, error.code, error.message];
  };
  try {
    const [status, code, message] = await processes(50);
    assert.deepEqual([status, code], [504, 'DEADLINE_EXCEEDED']);
    assert.match(message as string, /passed while it waited for sandbox sbx_abc123 on this node: it was not run/);
    assert.deepEqual((await processes(5000)).slice(0, 2), [500, 'INTERNAL'], 'within its budget, the call is sent to the sandbox');
    assert.deepEqual((await processes()).slice(0, 2), [500, 'INTERNAL'], 'as is one without a budget');
  } finally {
    await closeServer(server);
  }
});

test("route urls: params encoded, query appended, a missing param refused; every route's param schemas name segments of its path", () => {
  assert.equal(routeUrl(nodeRoutes.volumeChanged, { sessionId: 'ses_a/b' }, { since: 'ckp_1 2' }), '/node/v1/volumes/ses_a%2Fb/changed?since=ckp_1+2');
  assert.equal(routeUrl(nodeRoutes.health), '/node/v1/health');
  assert.throws(() => routeUrl(nodeRoutes.deleteBase, {}), /no value for :baseId/);
  for (const [name, route] of Object.entries(nodeRoutes)) {
    const segments = new Set([...route.path.matchAll(/:([a-zA-Z]+)/g)].map((m) => m[1]));
    for (const param of Object.keys('params' in route ? route.params : {})) assert.ok(segments.has(param), `${name}: :${param} is not in ${route.path}`);
  }
  const keys = nodeRouteTable.map((r) => `${r.method} ${r.path}`);
  assert.equal(new Set(keys).size, keys.length, 'no route twice');
});
