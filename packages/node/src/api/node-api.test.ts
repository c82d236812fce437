import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WebSocket } from 'ws';
import { nodeRouteTable, nodeRoutes, routeUrl } from '@space/protocol';
import { closeServer, lineLog, listen } from '@space/server-kit';
import { type NodeApiDeps, createNodeApi } from './node-api.js';

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
async function nodeApi(): Promise<{ url: string; close(): Promise<void> }> {
  const router = createNodeApi({ nodeId: 'n1', token: 'right', log: lineLog(() => undefined) } as unknown as NodeApiDeps);
  const { server, port } = await listen(router, '127.0.0.1', 0);
  return { url: `http://127.0.0.1:${port}`, close: () => closeServer(server) };
}

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
    assert.equal((await call('DELETE', routeUrl(nodeRoutes.stopService, { sandboxId: 'sbx_1', name: 'Web' })))[0], 400);
    assert.equal((await call('POST', routeUrl(nodeRoutes.createBase), { baseId: 'bse_abc123' }))[0], 400);
    assert.equal((await call('GET', routeUrl(nodeRoutes.volumeChanged, { sessionId: 'ses_abc123' }, { since: 'nope' })))[0], 400);
    assert.equal((await call('GET', routeUrl(nodeRoutes.egressAudit, { sessionId: 'ses_abc123' }, { limit: 0 })))[0], 400);
  } finally {
    await api.close();
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
