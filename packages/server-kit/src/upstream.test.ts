import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import { WebSocket, WebSocketServer } from 'ws';
import { Readable } from 'node:stream';
import { z } from 'zod';
import { relaySockets } from './socket-relay.js';
import { Upstream } from './upstream.js';
import { Router } from './router.js';
import { lineLog } from './server-log.js';
import { listen, closeServer } from './listen.js';

/** A real HTTP server playing a hostile daemon: each path misbehaves in its own way. */
async function hostileServer(): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    if (req.headers.authorization !== 'Bearer t') {
      res.writeHead(401, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ error: { code: 'UNAUTHORIZED', message: 'no' } }));
    }
    switch (req.url) {
      case '/garbage':
        res.writeHead(200);
        return res.end('\x00\x01 not json at all');
      case '/wrong-shape':
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ exitCode: 'zero' }));
      case '/flood':
        res.writeHead(200);
        for (let i = 0; i < 64; i++) res.write(Buffer.alloc(64 * 1024, 0x20));
        return res.end('{}');
      case '/error':
        res.writeHead(404, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: { code: 'FILE_NOT_FOUND', message: 'no such file' } }));
      case '/download-no-length':
        res.writeHead(200, { 'transfer-encoding': 'chunked' });
        return res.end('abc');
      default:
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ exitCode: 0 }));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('Upstream: replies from below are bounded and validated', async () => {
  const { server, url } = await hostileServer();
  const upstream = new Upstream(url, 't', 'SANDBOX_UNAVAILABLE', 'daemon');
  const schema = z.object({ exitCode: z.number() }).strict();
  after(() => {
    upstream.close();
    server.close();
  });

  test('a valid reply passes', async () => {
    assert.deepEqual(await upstream.json('GET', '/ok', undefined, schema), { exitCode: 0 });
  });

  test('garbage, wrong shapes and floods become DAEMON_PROTOCOL_ERROR', async () => {
    for (const path of ['/garbage', '/wrong-shape'])
      await assert.rejects(upstream.json('GET', path, undefined, schema), { code: 'DAEMON_PROTOCOL_ERROR' }, path);
    await assert.rejects(
      upstream.json('GET', '/flood', undefined, schema, { limit: 1024 * 1024 }),
      (err: Error & { code?: string }) => err.code === 'DAEMON_PROTOCOL_ERROR' && /more than/.test(err.message),
    );
  });

  test('error replies keep their code', async () => {
    await assert.rejects(upstream.json('GET', '/error', undefined, schema), { code: 'FILE_NOT_FOUND', message: 'no such file' });
  });

  test('an unreachable peer is reported with the configured code', async () => {
    const dead = new Upstream('http://127.0.0.1:1', 't', 'NODE_UNAVAILABLE', 'node');
    await assert.rejects(dead.json('GET', '/x', undefined, schema), { code: 'NODE_UNAVAILABLE' });
    dead.close();
  });

  test('a download without a length is refused', async () => {
    const sink = createServer(async (_req, res) => {
      await upstream.download('/download-no-length', res).catch((err: Error & { code?: string }) => {
        res.writeHead(502);
        res.end(err.code);
      });
    });
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    const reply = await fetch(`http://127.0.0.1:${(sink.address() as AddressInfo).port}/`);
    assert.equal(reply.status, 502);
    assert.equal(await reply.text(), 'DAEMON_PROTOCOL_ERROR');
    sink.close();
  });
});

describe('relaySockets: a flooding or malformed peer is cut off', () => {
  async function relayTo(behaviour: (ws: WebSocket) => void): Promise<unknown[]> {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    wss.on('connection', behaviour);
    await new Promise((r) => wss.once('listening', r));
    const downstream = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
    const router = new Router({ log: lineLog(() => undefined), service: 'test' }).socket(
      '/relay',
      () => undefined,
      (client) => {
        relaySockets(client, new WebSocket(downstream), {
          label: 'daemon',
          validateUpstream: (m) => typeof m === 'object' && m !== null && 'type' in m,
          maxUpstreamRate: 100,
        });
      },
    );
    const { server, port } = await listen(router, '127.0.0.1', 0);
    const client = new WebSocket(`ws://127.0.0.1:${port}/relay`);
    const messages: unknown[] = [];
    await new Promise<void>((resolve) => {
      client.on('message', (raw) => messages.push(JSON.parse(raw.toString())));
      client.on('close', () => resolve());
    });
    await closeServer(server);
    wss.close();
    return messages;
  }

  test('non-JSON', async () => {
    const messages = await relayTo((ws) => ws.send('not json'));
    assert.deepEqual(messages.at(-1), { type: 'error', code: 'DAEMON_PROTOCOL_ERROR', message: 'daemon sent a message that is not JSON' });
  });

  test('wrong shape', async () => {
    const messages = await relayTo((ws) => ws.send(JSON.stringify({ nope: true })));
    assert.equal((messages.at(-1) as { code: string }).code, 'DAEMON_PROTOCOL_ERROR');
  });

  test('flood', async () => {
    const messages = await relayTo((ws) => {
      for (let i = 0; i < 1000; i++) ws.send(JSON.stringify({ type: 'stdout', data: '' }));
    });
    assert.ok(messages.length <= 101, `relayed ${messages.length} messages`);
    assert.match((messages.at(-1) as { message: string }).message, /more than 100 messages per second/);
  });
});

describe('Upstream connection resets', () => {
  const exitCodeSchema = z.object({ exitCode: z.number() });

  /** Runs `body` against a loopback server answering `{exitCode: 0}`, whose sockets `onConnection` watches. */
  async function withPeer(onConnection: (socket: import('node:net').Socket) => void, body: (upstream: Upstream) => Promise<void>): Promise<void> {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ exitCode: 0 }));
    });
    server.on('connection', onConnection);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const upstream = new Upstream(`http://127.0.0.1:${port}`, 't', 'SANDBOX_UNAVAILABLE', 'test peer');
    try {
      await body(upstream);
    } finally {
      upstream.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }

  test('resetAfter aborts the connection with a reset once the reply is read, and reset() aborts idle ones', async () => {
    const endings: string[] = [];
    const watch = (socket: import('node:net').Socket): void => {
      let how = 'close';
      socket.on('end', () => (how = 'end'));
      socket.on('error', (err: NodeJS.ErrnoException) => (how = err.code ?? 'error'));
      socket.on('close', () => endings.push(how));
    };
    await withPeer(watch, async (upstream) => {
      const reply = await upstream.json('GET', '/', undefined, exitCodeSchema, { resetAfter: true });
      assert.equal(reply.exitCode, 0);
      await upstream.json('GET', '/', undefined, exitCodeSchema);
      upstream.reset();
      for (let i = 0; i < 100 && endings.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(endings, ['ECONNRESET', 'ECONNRESET']);
    });
  });

  test('awaitPeerClose returns only after the peer closed its end (here: reset on the half-close)', async () => {
    const events: string[] = [];
    // Like the daemon after a quiesce: the half-close is answered with a reset, before Node's HTTP
    // server would end its side.
    const resetOnHalfClose = (socket: import('node:net').Socket): void => {
      socket.prependListener('end', () => {
        events.push('peer half-closed');
        socket.resetAndDestroy();
        events.push('reset by the server');
      });
    };
    await withPeer(resetOnHalfClose, async (upstream) => {
      const reply = await upstream.json('GET', '/', undefined, exitCodeSchema, { awaitPeerClose: true });
      events.push('json returned');
      assert.equal(reply.exitCode, 0);
      assert.deepEqual(events, ['peer half-closed', 'reset by the server', 'json returned']);
    });
  });

  test('a request on a kept-alive connection the peer dropped (reset, nothing read) is sent again on a new one; a streamed body is not', async () => {
    // Like the agent closing a connection without saying so: the next request on it is reset unread.
    let connections = 0;
    const dropAfterFirst = (socket: import('node:net').Socket): void => {
      const index = connections++;
      let requests = 0;
      socket.prependListener('data', () => {
        if (index === 0 && ++requests === 2) socket.resetAndDestroy();
      });
    };
    await withPeer(dropAfterFirst, async (upstream) => {
      assert.equal((await upstream.json('POST', '/', { n: 1 }, exitCodeSchema)).exitCode, 0);
      assert.equal((await upstream.json('POST', '/', { n: 2 }, exitCodeSchema)).exitCode, 0, 'sent again on a new connection');
      assert.equal(connections, 2);
    });
    connections = 0;
    await withPeer(dropAfterFirst, async (upstream) => {
      await upstream.json('POST', '/', { n: 1 }, exitCodeSchema);
      await assert.rejects(upstream.send('PUT', '/', Readable.from([Buffer.from('once only')])), /unreachable/);
    });
  });
});

test('cutWaiting ends the requests a peer holds without answering (frozen, or its packets dropped), and only those; silentMs says how long it has answered none', async () => {
  // Accepts every request and answers only /answered: like a node whose process is frozen.
  const server = createServer((req, res) => {
    if (req.url === '/answered') res.writeHead(200, { 'content-type': 'application/json' }).end('{"exitCode":0}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const upstream = new Upstream(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 't', 'NODE_UNAVAILABLE', 'node n1');
  try {
    const schema = z.object({ exitCode: z.number() });
    const held = [upstream.json('POST', '/held', { n: 1 }, schema), upstream.json('GET', '/held', undefined, schema)];
    for (const call of held) call.catch(() => undefined);
    assert.equal((await upstream.json('GET', '/answered', undefined, schema)).exitCode, 0);
    while (upstream.waitingCalls < 2) await new Promise((r) => setTimeout(r, 10));
    assert.equal(upstream.waitingCalls, 2, 'the answered call no longer waits');
    // Silent: how long the waiting calls have gone without the peer answering any call.
    const quiet = upstream.silentMs();
    await new Promise((r) => setTimeout(r, 60));
    assert.ok(upstream.silentMs() >= quiet + 50, `grows while the peer answers nothing: ${quiet} then ${upstream.silentMs()}`);
    await upstream.json('GET', '/answered', undefined, schema);
    assert.ok(upstream.silentMs() < 50, `an answer to any call: the peer is not silent (${upstream.silentMs()})`);
    assert.equal(upstream.cutWaiting('node n1 was found lost'), 2);
    for (const call of held) await assert.rejects(call, { code: 'NODE_UNAVAILABLE', message: 'node n1 was found lost' });
    assert.equal(upstream.waitingCalls, 0);
    assert.equal(upstream.cutWaiting('again'), 0);
    assert.equal(upstream.silentMs(), 0, 'nothing waits');
    // Later calls open new connections.
    assert.equal((await upstream.json('GET', '/answered', undefined, schema)).exitCode, 0);
  } finally {
    upstream.close();
    await closeServer(server);
  }
});
