import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { malformedFrames, sendRawFrame, sendRawRequest } from '@space/server-kit/testing';
import { Api } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

/**
 * What a tenant (or a careless client) can send that no conforming client does. Each case once
 * crashed the platform, answered 500 or held a connection open; none may now.
 */
describe('hostile input: one tenant cannot take the platform down', () => {
  let platform: RunningPlatform;
  let admin: Api;
  let tenant: Api;
  const sessions: string[] = [];

  platformForSuite(sessions, (p, a) => ((platform = p), (admin = a)), { env: { SPACE_TENANT_MAX_STREAMS: '3' } });

  async function tenantSession(): Promise<string> {
    if (!tenant) {
      const { id } = (await admin.call('POST', '/v1/tenants', { name: 'hostile' })).body;
      tenant = new Api(platform.url, (await admin.call('POST', '/v1/keys', { tenantId: id })).body.key);
    }
    const session = await tenant.createSession({ template: 'tiny', checkpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(session.id);
    return session.id;
  }

  const address = (): { host: string; port: number } => {
    const url = new URL(platform.url);
    return { host: url.hostname, port: Number(url.port) };
  };

  test('a malformed first frame on every stream route closes that stream with its close code; the platform keeps serving', { timeout: 120_000 }, async () => {
    const id = await tenantSession();
    const { pid } = await tenant.exec(id, 'sleep 600', { background: true });
    const routes = [
      `/v1/sessions/${id}/exec/stream`,
      `/v1/sessions/${id}/pty`,
      `/v1/sessions/${id}/processes/${pid}/attach`,
      `/v1/sessions/${id}/files/watch?path=/workspace`,
    ];
    const { host, port } = address();
    for (const route of routes) {
      for (const [name, { frame, closeCode }] of Object.entries(malformedFrames)) {
        const result = await sendRawFrame(host, port, route, { authorization: `Bearer ${tenant.key}` }, frame);
        assert.equal(result.status, 101, `${route}, ${name}: upgrade`);
        assert.equal(result.closeCode, closeCode, `${route}, ${name}: close code`);
        assert.equal(platform.process.exitCode, null, `the platform is still running after ${name} on ${route}`);
      }
      assert.equal((await admin.call('GET', '/healthz')).status, 200);
    }
    assert.equal((await tenant.exec(id, 'echo still-here')).stdout, 'still-here\n');
    assert.match(platform.output(), /WebSocket closed on a protocol error/);
  });

  test('client mistakes are 4xx with a stable code, never 500', { timeout: 60_000 }, async () => {
    const id = await tenantSession();
    await tenant.exec(id, 'echo x > /workspace/plain && echo y > /dev/shm/elsewhere');
    const exec = (body: unknown) => tenant.call('POST', `/v1/sessions/${id}/exec`, body);
    const mistakes: [string, Promise<{ status: number; body: any }>, number, string][] = [
      ['exec with cwd naming a file', exec({ cmd: ['true'], cwd: '/workspace/plain' }), 400, 'NOT_A_DIRECTORY'],
      ['exec with a missing cwd', exec({ cmd: ['true'], cwd: '/workspace/none' }), 404, 'FILE_NOT_FOUND'],
      ['exec of an empty program', exec({ cmd: [''] }), 400, 'VALIDATION_FAILED'],
      ['exec of a NUL byte', exec({ cmd: '\u0000' }), 400, 'VALIDATION_FAILED'],
      ['move of /', tenant.call('POST', `/v1/sessions/${id}/files/move`, { from: '/', to: '/workspace/root' }), 400, 'INVALID_PATH'],
    ];
    for (const [what, reply, status, code] of mistakes) {
      const { status: got, body } = await reply;
      assert.deepEqual([got, body.error?.code], [status, code], `${what}: ${JSON.stringify(body)}`);
    }
    // Across file systems (the sandbox's /dev/shm is a tmpfs): done the way mv does it.
    const moved = await tenant.call('POST', `/v1/sessions/${id}/files/move`, { from: '/dev/shm/elsewhere', to: '/workspace/moved' });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    assert.equal((await tenant.exec(id, 'cat /workspace/moved')).stdout, 'y\n');
  });

  test('CONNECT, absurd targets and garbage get a clear 4xx; every error names its request', { timeout: 30_000 }, async () => {
    const { host, port } = address();
    const connect = await sendRawRequest(host, port, `CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    assert.match(connect.reply, /^HTTP\/1\.1 405 /);
    const longId = await tenant.call('GET', `/v1/sessions/ses_${'a'.repeat(10_000)}`);
    assert.deepEqual([longId.status, longId.body.error.code], [414, 'URI_TOO_LONG']);
    // Past Node's 16 KiB of headers the parser refuses it first, with a JSON reply all the same.
    const longerId = await tenant.call('GET', `/v1/sessions/ses_${'a'.repeat(20_000)}`);
    assert.deepEqual([longerId.status, longerId.body.error.code], [431, 'HEADERS_TOO_LARGE']);
    const garbage = await sendRawRequest(host, port, 'HELLO\r\n\r\n');
    assert.match(garbage.reply, /^HTTP\/1\.1 400 /);
    const missing = await tenant.call('GET', '/v1/sessions/ses_nosuchsession');
    assert.equal(missing.status, 404);
    assert.match(missing.body.error.requestId, /^cp-[0-9a-f]{12}$/);
    assert.equal((await admin.call('GET', '/healthz')).status, 200);
  });

  test('a tenant past its stream limit gets 429 with Retry-After; closing one frees a place', { timeout: 60_000 }, async () => {
    const id = await tenantSession();
    const open = await Promise.all(
      [1, 2, 3].map(
        () =>
          new Promise<ReturnType<Api['socket']>>((resolve, reject) => {
            const ws = tenant.socket(`/v1/sessions/${id}/files/watch?path=/workspace`);
            ws.once('message', () => resolve(ws));
            ws.once('error', reject);
          }),
      ),
    );
    const { host, port } = address();
    const refused = await sendRawRequest(
      host,
      port,
      `GET /v1/sessions/${id}/files/watch?path=/workspace HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${tenant.key}\r\n\r\n`,
    );
    assert.match(refused.reply, /^HTTP\/1\.1 429 /);
    assert.match(refused.reply, /retry-after: 1/i);
    assert.match(refused.reply, /TOO_MANY_REQUESTS/);
    // Another tenant is not affected.
    assert.equal((await admin.call('GET', '/v1/sessions')).status, 200);
    const closed = new Promise((resolve) => open[0]!.once('close', resolve));
    open[0]!.close();
    await closed;
    await new Promise((r) => setTimeout(r, 200));
    const again = tenant.socket(`/v1/sessions/${id}/files/watch?path=/workspace`);
    await new Promise<void>((resolve, reject) => {
      again.once('message', () => resolve());
      again.once('error', reject);
    });
    for (const ws of [...open.slice(1), again]) ws.close();
  });
});
