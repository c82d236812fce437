import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { WebSocket } from 'ws';
import { publicRoutes } from '@space/protocol';
import { Router, closeServer, lineLog, listen } from '@space/server-kit';
import { createPublicApi } from './public-api.js';
import { servicesOnFakeNode } from '../test-support/services.js';
import { publicApiDeps } from '../service-graph.js';
import { defaultControlPlaneSettings } from '../settings.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

test('every operation of the API reference is served by the control plane (an unauthenticated call gets 401, not 404/405; health and metrics 200)', async () => {
  // Every route authenticates before anything reaches the node.
  const s = await servicesOnFakeNode();
  const router = createPublicApi(publicApiDeps(s, defaultControlPlaneSettings(), () => undefined));
  const { server, port } = await listen(router, '127.0.0.1', 0);
  try {
    for (const route of publicRoutes) {
      const url = `127.0.0.1:${port}${route.path.replace(/:[a-zA-Z]+/g, 'x1')}`;
      if (route.transport === 'websocket') {
        const status = await new Promise<number>((resolve) => {
          const ws = new WebSocket(`ws://${url}`);
          ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
          ws.on('open', () => (ws.close(), resolve(101)));
          ws.on('error', () => resolve(-1));
        });
        assert.equal(status, 401, `${route.method} ${route.path}`);
      } else {
        const res = await fetch(`http://${url}`, { method: route.method });
        // A route without a key that takes a body (a node's join) refuses the empty one.
        assert.equal(res.status, route.withoutKey ? (route.body ? 400 : 200) : 401, `${route.method} ${route.path}`);
      }
    }
    assert.deepEqual(s.node.calls, [], 'nothing reached the node');
  } finally {
    await closeServer(server);
    await s.store.close();
  }
});

test('a route missing from the table cannot be registered: nothing is served without its schemas and reference entry', () => {
  const router = new Router({ log: lineLog(() => undefined), service: 'cp', table: publicRoutes });
  router.on('GET', '/v1/sessions', () => undefined);
  assert.throws(() => router.on('GET', '/v1/secret-door', () => undefined), /GET \/v1\/secret-door is not in the API's route table/);
  assert.throws(() => router.on('PATCH', '/v1/sessions', () => undefined), /PATCH \/v1\/sessions is not in/);
  assert.throws(
    () =>
      router.socket(
        '/v1/sessions/:sessionId/tunnel',
        () => undefined,
        () => undefined,
      ),
    /GET \/v1\/sessions\/:sessionId\/tunnel is not in/,
  );
  assert.throws(
    () => router.proxy('/v1/elsewhere/*', { request: async () => undefined, upgrade: async () => undefined }),
    /a proxy on \/v1\/elsewhere\/\* is not in/,
  );
});

test('docs/api-reference.md is generated from the current schemas', () => {
  const check = spawnSync(process.execPath, [path.join(root, 'scripts/api-reference.mjs'), '--check'], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stderr);
});
