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
import type { TLSSocket } from 'node:tls';
import { lineLog } from './server-log.js';
import { sendJson } from './respond.js';
import { makeTestCertificates, makeTestClientCertificate } from './test-certificates.js';
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
    const upstream = new Upstream(url, 't', ErrorCode.NODE_UNAVAILABLE, 'node n1', 3000, { ca });
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

    const impostor = new Upstream(url, 't', ErrorCode.NODE_UNAVAILABLE, 'node n1', 3000, { ca: readFileSync(theirs.caFile, 'utf8') });
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

test('mutual TLS (listen with a client CA): a client without a certificate of that CA is refused (401), both sides told why; a renewed client certificate is presented from the next connection on', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-mtls-'));
  const ours = makeTestCertificates(path.join(dir, 'ours'), ['127.0.0.1'], 'SPACE test cluster CA');
  // Another CA, which the foreign client certificate below is signed by.
  makeTestCertificates(path.join(dir, 'theirs'), ['127.0.0.1'], 'another CA');
  const pem = (file: string) => readFileSync(file, 'utf8');
  const identityOf = (files: { certFile: string; keyFile: string }) => ({ cert: pem(files.certFile), key: pem(files.keyFile) });
  const first = identityOf(makeTestClientCertificate(path.join(dir, 'ours'), 'control plane one', 'one'));
  const second = identityOf(makeTestClientCertificate(path.join(dir, 'ours'), 'control plane two', 'two'));
  const foreign = identityOf(makeTestClientCertificate(path.join(dir, 'theirs'), 'control plane one'));
  const expired = identityOf(makeTestClientCertificate(path.join(dir, 'ours'), 'control plane old', 'old', 0));
  const ca = pem(ours.caFile);
  const refused: string[] = [];
  // Answers with the name on the client's certificate: which one the handshake carried.
  const router = new Router({ log: lineLog(() => undefined), service: 'test' }).on('GET', '/who', async ({ req, res }) =>
    sendJson(res, 200, { who: (req.socket as TLSSocket).getPeerCertificate().subject.CN }),
  );
  const { server, port } = await listen(router, '127.0.0.1', 0, {}, { ...identityOf(ours), clientCa: ca, onRefused: (reason) => refused.push(reason) });
  const url = `https://127.0.0.1:${port}`;
  const who = z.object({ who: z.string() });
  let current = first;
  const upstream = new Upstream(url, 't', ErrorCode.NODE_UNAVAILABLE, 'node n1', 3000, { ca, identity: () => current });
  const anonymous = new Upstream(url, 't', ErrorCode.NODE_UNAVAILABLE, 'node n1', 3000, { ca });
  const impostor = new Upstream(url, 't', ErrorCode.NODE_UNAVAILABLE, 'node n1', 3000, { ca, identity: () => foreign });
  const outdated = new Upstream(url, 't', ErrorCode.NODE_UNAVAILABLE, 'node n1', 3000, { ca, identity: () => expired });
  try {
    assert.deepEqual(await upstream.json('GET', '/who', undefined, who), { who: 'control plane one' });
    current = second;
    assert.deepEqual(await upstream.json('GET', '/who', undefined, who), { who: 'control plane two' }, 'the renewed certificate, on a new connection');
    // A stream presents it too: the router answers the upgrade (it has no stream route), so the handshake went through.
    const ws = upstream.socket('/who').on('error', () => undefined);
    const status = await new Promise<number | undefined>((resolve, reject) =>
      ws
        .once('unexpected-response', (req, res) => {
          resolve(res.statusCode);
          req.destroy();
        })
        .once('error', reject),
    );
    assert.equal(status, 404);

    // Issued valid for 0 days: expired once the second it was issued is over.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    for (const client of [anonymous, impostor, outdated]) {
      await assert.rejects(client.json('GET', '/who', undefined, who), {
        code: ErrorCode.UNAUTHORIZED,
        message: /certificate of this server's CA are served \(mutual TLS\)/,
      });
    }
    assert.deepEqual(
      refused.map((r) => r.replace(/^.*\(mutual TLS\): /, '').replace(/ \(.*\)$/, '')),
      ['it presented no certificate', 'its certificate is not of the CA this server takes', 'its certificate has expired'],
    );
  } finally {
    for (const client of [upstream, anonymous, impostor, outdated]) client.close();
    await closeServer(server);
    rmSync(dir, { recursive: true, force: true });
  }
});
