import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { DaemonChannel } from './daemon-channel.js';

/** Host TCP sockets on `port` in a state (hex code of /proc/net/tcp: 06 TIME_WAIT, 0A LISTEN). */
function socketsInState(port: number, state: string): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .filter((line) => {
      const fields = line.trim().split(/\s+/);
      return fields[1]?.endsWith(`:${hexPort}`) && fields[3] === state;
    }).length;
}

const get = (port: number, headers: Record<string, string> = {}): Promise<string> =>
  new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent: false, headers }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });

test('the daemon never closes a connection first (no TIME_WAIT on its side), and quiesce/SIGUSR2 close and reopen the listener', async () => {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address() as AddressInfo;
  await new Promise((r) => probe.close(r));
  const server = createServer((_req, res) => res.end('ok'));
  const channel = new DaemonChannel(server, port);
  await channel.listen();
  try {
    // `connection: close` makes Node's HTTP server end the socket after answering: the daemon's
    // side waits for the client's FIN instead of sending its own first.
    for (let i = 0; i < 5; i++) assert.equal(await get(port, { connection: 'close' }), 'ok');
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(socketsInState(port, '06'), 0, 'no TIME_WAIT on the daemon port');

    // An idle keep-alive connection, then quiesce: it is reset, and nothing listens any more.
    const idle = connect({ host: '127.0.0.1', port });
    await new Promise((r) => idle.once('connect', r));
    const reset = new Promise<string>((resolve) => idle.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? '')));
    await new Promise((r) => setTimeout(r, 50));
    const asking = connect({ host: '127.0.0.1', port });
    await new Promise((r) => asking.once('connect', r));
    await new Promise((r) => setTimeout(r, 50));
    const daemonSide = [...(channel as unknown as { connections: Set<import('node:net').Socket> }).connections].find((s) => s.remotePort === asking.localPort)!;
    channel.quiesce(daemonSide);
    assert.equal(await reset, 'ECONNRESET');
    // The node agent half-closes the asking connection after the answer; the daemon resets it, so the
    // reset the node receives proves the daemon's descriptor is closed.
    const askingReset = new Promise<string>((resolve) => asking.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? '')));
    asking.end();
    assert.equal(await askingReset, 'ECONNRESET');
    assert.ok(daemonSide.destroyed);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(socketsInState(port, '0A'), 0, 'the listener is closed');
    assert.equal(socketsInState(port, '06'), 0, 'no TIME_WAIT left');

    process.kill(process.pid, 'SIGUSR2');
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(await get(port), 'ok', 'listening again after SIGUSR2');
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});
