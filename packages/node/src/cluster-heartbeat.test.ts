import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { type NodeHeartbeat, NodeHeartbeatSchema } from '@space/protocol';
import { ClusterHeartbeat } from './cluster-heartbeat.js';

/** A control plane's heartbeat route over real HTTP, checking beats against `schema` (strict, as control planes do): 400 for one it refuses. */
async function controlPlane(schema: { safeParse(v: unknown): { success: boolean } }) {
  const received: Record<string, unknown>[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => {
      const beat = JSON.parse(text) as Record<string, unknown>;
      received.push(beat);
      const ok = schema.safeParse(beat).success;
      res
        .writeHead(ok ? 200 : 400, { 'content-type': 'application/json' })
        .end(JSON.stringify(ok ? { ok: true, stop: [] } : { error: { code: 'VALIDATION_FAILED' } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, server };
}

const beat: NodeHeartbeat = {
  id: 'node-1',
  url: 'http://127.0.0.1:7071',
  token: 'token-0123456789abcdef',
  capacity: { memoryMb: 4096, cpus: 2 },
  sandboxes: 1,
  egressUnconfigured: ['ses_abc123'],
  usageBatches: 3,
};

function heartbeatTo(url: string): ClusterHeartbeat {
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
  return new ClusterHeartbeat({
    controlPlanes: [url],
    credential: 'node-credential',
    intervalMs: 60_000,
    fenceAfterMs: 5_000,
    beat: (joining) => ({ ...beat, ...(joining ? { sessions: ['ses_abc123'] } : {}) }),
    stopMoved: async () => undefined,
    fence: async () => undefined,
    liftFence: async () => undefined,
    log: quiet,
  });
}

test('a heartbeat says what the node needs; a control plane from before those fields gets it again without them, and the node counts as joined', async () => {
  const older = await controlPlane(NodeHeartbeatSchema.omit({ egressUnconfigured: true, usageBatches: true }).strict());
  const current = await controlPlane(NodeHeartbeatSchema);
  const heartbeats = [heartbeatTo(older.url), heartbeatTo(current.url)];
  try {
    assert.deepEqual(await Promise.all(heartbeats.map((h) => h.start())), [true, true], 'both took a beat');
    assert.deepEqual(
      older.received.map((b) => [b.egressUnconfigured, b.usageBatches, b.sessions]),
      [
        [['ses_abc123'], 3, ['ses_abc123']],
        [undefined, undefined, ['ses_abc123']],
      ],
      'refused with the new fields, taken without them (still joining, with its sessions)',
    );
    assert.deepEqual(
      current.received.map((b) => [b.egressUnconfigured, b.usageBatches]),
      [[['ses_abc123'], 3]],
    );
  } finally {
    await Promise.all(heartbeats.map((h) => h.stop()));
    older.server.close();
    current.server.close();
  }
});
