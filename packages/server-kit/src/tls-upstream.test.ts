import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { mkdtempSync } from 'node:fs';
import { WebSocket, WebSocketServer } from 'ws';
import { z } from 'zod';
import { ErrorCode } from '@space/protocol';
import { proxyRequest, proxyUpgrade } from './http-proxy.js';
import { closeServer, listen } from './listen.js';
import { Router } from './router.js';
import { lineLog } from './server-log.js';
import { sendJson } from './respond.js';
import { makeTestCertificates } from './test-certificates.js';
import { Upstream } from './upstream.js';

test('a peer served over TLS (listen with a certificate): reached with its CA by calls, streams, and proxied requests and upgrades; refused with another CA or over plain HTTP', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-tls-upstream-'));
  const ours = makeTestCertificates(path.join(dir, 'ours'), ['127.0.0.1'], 'SPACE test cluster CA');
  const theirs = makeTestCertificates(path.join(dir, 'theirs'), ['127.0.0.1'], 'another CA');
  const ca = readFileSync(ours.caFile, 'utf8');
  const router = new Router({ log: lineLog(() => undefined), service: 'test' }).on('GET', '/who', async ({ res }) => sendJson(res, 200, { who: 'node' }));
  const tls = { cert: readFileSync(ours.certFile, 'utf8'), key: readFileSync(ours.keyFile, 'utf8') };
  const { server, port } = await listen(router, '127.0.0.1', 0, {}, tls);
  const sockets = new WebSocketServer({ noServer: true });
  // Upgrades are this test's, not the router's (which has no stream route).
  server.removeAllListeners('upgrade');
  server.on('upgrade', (req, socket, head) => sockets.handleUpgrade(req, socket, head, (ws) => ws.send('over TLS')));
  // The proxy's own front: plain HTTP, passing each request on to the TLS peer.
  const front: Server = createServer(
    (req, res) => void proxyRequest(req, res, { host: '127.0.0.1', port, path: '/who', tls: { ca } }).catch(() => res.destroy()),
  );
  front.on(
    'upgrade',
    (req, socket, head) => void proxyUpgrade(req, socket, head, { host: '127.0.0.1', port, path: '/stream', tls: { ca } }).catch(() => socket.destroy()),
  );
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  try {
    const url = `https://127.0.0.1:${port}`;
    const upstream = new Upstream(url, 't', ErrorCode.NODE_UNAVAILABLE, 'node n1', 3000, ca);
    assert.deepEqual(await upstream.json('GET', '/who', undefined, z.object({ who: z.string() })), { who: 'node' });
    const ws = upstream.socket('/stream');
    const message = await new Promise<string>((resolve, reject) => {
      ws.once('message', (data) => resolve(data.toString()));
      ws.once('error', reject);
    });
    ws.close();
    assert.equal(message, 'over TLS');
    const frontPort = (front.address() as AddressInfo).port;
    assert.deepEqual(await (await fetch(`http://127.0.0.1:${frontPort}/`)).json(), { who: 'node' });
    const proxied = new WebSocket(`ws://127.0.0.1:${frontPort}/stream`);
    assert.equal(await new Promise<string>((resolve, reject) => proxied.once('message', (d) => resolve(d.toString())).once('error', reject)), 'over TLS');
    proxied.close();

    const impostor = new Upstream(url, 't', ErrorCode.NODE_UNAVAILABLE, 'node n1', 3000, readFileSync(theirs.caFile, 'utf8'));
    await assert.rejects(impostor.json('GET', '/who', undefined, z.unknown()), (err: Error & { code?: string }) => {
      assert.equal(err.code, ErrorCode.NODE_UNAVAILABLE);
      assert.match(err.message, /node n1 unreachable: .*(self-signed|issuer|certificate)/i);
      return true;
    });
    const plain = new Upstream(`http://127.0.0.1:${port}`, 't', ErrorCode.NODE_UNAVAILABLE, 'node n1', 3000);
    await assert.rejects(plain.json('GET', '/who', undefined, z.unknown(), { timeoutMs: 3000 }), { code: ErrorCode.NODE_UNAVAILABLE });
    upstream.close();
    impostor.close();
    plain.close();
  } finally {
    await new Promise((resolve) => front.close(resolve));
    sockets.close();
    await closeServer(server);
    rmSync(dir, { recursive: true, force: true });
  }
});
