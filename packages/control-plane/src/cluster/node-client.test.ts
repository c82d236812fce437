import assert from 'node:assert/strict';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { ErrorCode, SpaceError } from '@space/protocol';
import { NodeClient } from './node-client.js';

/** A node API over real HTTP that serves only `routes` ("METHOD /path": status and body); anything else is 404 ROUTE_NOT_FOUND, as a node's router answers. */
async function nodeServing(routes: Record<string, [number, unknown]>): Promise<{ url: string; asked: string[]; server: Server }> {
  const asked: string[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const key = `${req.method} ${req.url}`;
      asked.push(key);
      const [status, body] = routes[key] ?? [404, new SpaceError(ErrorCode.ROUTE_NOT_FOUND, `no route for ${key}`).toBody()];
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked, server };
}

test('deleting bases on a node from before the one-call route: asked one base at a time; any other failure is the caller’s', async () => {
  const old = await nodeServing({ 'DELETE /node/v1/bases/bse_a1': [200, { ok: true }], 'DELETE /node/v1/bases/bse_a2': [200, { ok: true }] });
  const current = await nodeServing({ 'POST /node/v1/base-deletions': [200, { ok: true }] });
  const failing = await nodeServing({ 'POST /node/v1/base-deletions': [500, new SpaceError(ErrorCode.INTERNAL, 'disk gone').toBody()] });
  const [toOld, toCurrent, toFailing] = [old, current, failing].map(({ url }, i) => new NodeClient(`node-${i}`, url, 'token-0123456789abcdef'));
  try {
    await toOld!.deleteBases(['bse_a1', 'bse_a2']);
    await toCurrent!.deleteBases(['bse_a1', 'bse_a2']);
    await assert.rejects(toFailing!.deleteBases(['bse_a1']), /disk gone/);
    assert.deepEqual(old.asked, ['POST /node/v1/base-deletions', 'DELETE /node/v1/bases/bse_a1', 'DELETE /node/v1/bases/bse_a2']);
    assert.deepEqual(current.asked, ['POST /node/v1/base-deletions']);
    assert.deepEqual(failing.asked, ['POST /node/v1/base-deletions'], 'not asked base by base');
  } finally {
    for (const client of [toOld, toCurrent, toFailing]) client!.close();
    for (const { server } of [old, current, failing]) server.close();
  }
});
