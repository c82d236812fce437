import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { WebSocket } from 'ws';
import { publicRoutes } from '@space/protocol';
import { lineLog, listen, closeServer } from '@space/server-kit';
import { createPublicApi } from './api/public-api.js';
import { Activity } from './activity.js';
import { Authenticator } from './auth.js';
import { SessionCheckpointService } from './session-checkpoint-service.js';
import { CheckpointTaker } from './checkpoint-taker.js';
import { Metrics } from './metrics.js';
import { NodeClient } from './node-client.js';
import { SessionCalls } from './session-calls.js';
import { SessionService } from './session-service.js';
import { SqliteStore } from './store/sqlite-store.js';
import { EgressService } from './egress-service.js';
import { SecretCipher } from './secret-cipher.js';
import { LifecycleQueue } from './lifecycle-queue.js';
import { TenantLimits } from './tenant-limits.js';
import { TemplateCatalog } from './template-catalog.js';
import { TemplateService } from './template-service.js';
import { randomBytes } from 'node:crypto';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

test('every operation of the API reference is served by the control plane (an unauthenticated call gets 401, not 404/405)', async () => {
  const store = new SqliteStore(':memory:');
  const metrics = new Metrics();
  // No node behind it: the calls are refused before any would be made.
  const node = new NodeClient('node_none', 'http://127.0.0.1:9', 'x');
  const taker = new CheckpointTaker(store, node, metrics);
  const egress = new EgressService(store, node, new SecretCipher(randomBytes(32)), () => undefined);
  const lifecycle = new LifecycleQueue(store, () => undefined);
  const activity = new Activity();
  const auth = new Authenticator(store);
  const limits = new TenantLimits(auth, store, metrics);
  const catalog = new TemplateCatalog(store);
  const sessions = new SessionService({ store, node, metrics, taker, activity, egress, lifecycle, limits, templates: catalog, defaultDiskGb: 10 });
  const calls = new SessionCalls(store, sessions, lifecycle, activity);
  const checkpoints = new SessionCheckpointService(store, node, sessions, taker, metrics, limits);
  const router = createPublicApi({
    auth,
    sessions,
    calls,
    checkpoints,
    store,
    metrics,
    node,
    egress,
    log: lineLog(() => undefined),
    limits,
    templates: { catalog, service: new TemplateService(store, node, checkpoints, catalog) },
  });
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
        assert.equal(res.status, 401, `${route.method} ${route.path}`);
      }
    }
  } finally {
    node.close();
    await closeServer(server);
    store.close();
  }
});

test('docs/api-reference.md is generated from the current schemas', () => {
  const check = spawnSync(process.execPath, [path.join(root, 'scripts/api-reference.mjs'), '--check'], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stderr);
});
