import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import { type AddressInfo, type Socket, connect } from 'node:net';
import { test } from 'node:test';
import { InboundConnections } from './inbound-connections.js';

test('inbound connections: a reset closes the kept-alive and the upgraded connections with a TCP reset; later requests open new ones', async () => {
  const seen: string[] = [];
  const server = createServer((_req, res) => res.end('ok'));
  server.on('connection', (socket: Socket) => {
    socket.on('error', (err: NodeJS.ErrnoException) => seen.push(err.code ?? err.message));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const inbound = new InboundConnections();
  const get = (): Promise<string> =>
    new Promise((resolve, reject) =>
      request({ host: '127.0.0.1', port, agent: inbound.agent }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d));
        res.on('end', () => resolve(body));
      })
        .on('error', reject)
        .end(),
    );
  try {
    assert.equal(await get(), 'ok');
    const upgraded = connect({ host: '127.0.0.1', port });
    await new Promise((resolve) => upgraded.once('connect', resolve));
    inbound.track(upgraded);
    await new Promise((r) => setTimeout(r, 50));
    inbound.reset();
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(seen, ['ECONNRESET', 'ECONNRESET'], 'the server saw both connections reset, not closed');
    assert.equal(await get(), 'ok', 'a later request opens a new connection');
  } finally {
    inbound.close();
    server.close();
  }
});
