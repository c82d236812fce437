import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Router } from './router.js';
import { closeServer, listen } from './listen.js';
import { sendJson } from './respond.js';
import { readJson } from './body.js';
import { z } from 'zod';
import { malformedFrames, sendRawFrame, sendRawRequest } from './testing/hostile-client.js';

/** A router with one WebSocket route that echoes and one JSON route, logging into `lines`. */
async function hostileTarget() {
  const lines: string[] = [];
  const router = new Router({ log: { warn: (m) => lines.push(m), error: (m) => lines.push(m) }, service: 'test' })
    .socket(
      '/echo',
      () => undefined,
      (ws) => ws.on('message', (data) => ws.send(String(data))),
    )
    .on('POST', '/json', async ({ req, res }) => sendJson(res, 200, await readJson(req, z.object({ n: z.number() }))))
    .on('GET', '/boom', () => {
      throw new Error('a bug of ours');
    });
  const { server, port } = await listen(router, '127.0.0.1', 0, { headersTimeoutMs: 1000, requestTimeoutMs: 3000 });
  return { server, port, lines };
}

async function healthy(port: number): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${port}/json`, { method: 'POST', body: '{"n":1}' });
  assert.equal(res.status, 200, 'the server still answers');
}

test('a malformed first WebSocket frame closes that connection with its RFC 6455 code, is logged, and the server keeps serving', async () => {
  const { server, port, lines } = await hostileTarget();
  try {
    for (const [name, { frame, closeCode }] of Object.entries(malformedFrames)) {
      const result = await sendRawFrame('127.0.0.1', port, '/echo', {}, frame);
      assert.equal(result.status, 101, name);
      assert.equal(result.closeCode, closeCode, `${name}: close code`);
      await healthy(port);
    }
    assert.equal(lines.filter((l) => l.includes('protocol error')).length, Object.keys(malformedFrames).length);
  } finally {
    await closeServer(server);
  }
});

test('a 500 carries a request id that names its cause in the log; every reply has x-request-id', async () => {
  const { server, port, lines } = await hostileTarget();
  try {
    const res = await fetch(`http://127.0.0.1:${port}/boom`);
    assert.equal(res.status, 500);
    const body = (await res.json()) as { error: { code: string; requestId: string } };
    assert.equal(body.error.code, 'INTERNAL');
    assert.match(body.error.requestId, /^test-[0-9a-f]{12}$/);
    assert.equal(res.headers.get('x-request-id'), body.error.requestId);
    assert.ok(
      lines.some((l) => l.startsWith(body.error.requestId) && l.includes('a bug of ours')),
      lines.join('\n'),
    );
    const ok = await fetch(`http://127.0.0.1:${port}/json`, { method: 'POST', body: '{"n":1}' });
    assert.match(ok.headers.get('x-request-id') ?? '', /^test-/);
    // A client's mistake is not logged as ours.
    await fetch(`http://127.0.0.1:${port}/json`, { method: 'POST', body: '{' });
    assert.equal(lines.length, 1);
  } finally {
    await closeServer(server);
  }
});

test('slow or broken requests are answered with a clear 4xx and closed, never left open or dropped', async () => {
  const { server, port } = await hostileTarget();
  try {
    // Headers that never finish: 408 once the headers timeout passes.
    const slowHeaders = await sendRawRequest('127.0.0.1', port, 'GET /json HTTP/1.1\r\nHost: x\r\n', 10_000);
    assert.ok(slowHeaders.closed, 'connection closed');
    assert.match(slowHeaders.reply, /^HTTP\/1\.1 408 /);

    // A body shorter than its content-length: 408 once no byte arrives for the idle time, or at the request timeout.
    const started = Date.now();
    const shortBody = await sendRawRequest('127.0.0.1', port, 'POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"n":', 40_000);
    assert.ok(shortBody.closed, 'connection closed');
    assert.match(shortBody.reply, /^HTTP\/1\.1 408 /);
    assert.ok(Date.now() - started < 35_000);

    const connect = await sendRawRequest('127.0.0.1', port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    assert.match(connect.reply, /^HTTP\/1\.1 405 /);
    assert.match(connect.reply, /METHOD_NOT_ALLOWED/);

    const longTarget = await fetch(`http://127.0.0.1:${port}/json/${'x'.repeat(9000)}`);
    assert.equal(longTarget.status, 414);
    assert.equal(((await longTarget.json()) as { error: { code: string } }).error.code, 'URI_TOO_LONG');

    const longUpgrade = await sendRawFrame('127.0.0.1', port, `/echo/${'x'.repeat(9000)}`, {}, Buffer.alloc(0));
    assert.equal(longUpgrade.status, 414);

    const garbage = await sendRawRequest('127.0.0.1', port, 'NOT HTTP AT ALL\r\n\r\n');
    assert.match(garbage.reply, /^HTTP\/1\.1 400 /);

    const hugeHeaders = await sendRawRequest('127.0.0.1', port, `GET /json HTTP/1.1\r\nHost: x\r\nX-Pad: ${'p'.repeat(20_000)}\r\n\r\n`);
    assert.match(hugeHeaders.reply, /^HTTP\/1\.1 431 /);
    await healthy(port);
  } finally {
    await closeServer(server);
  }
});
