import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { execFileSync } from 'node:child_process';
import { WebSocket } from 'ws';
import { Api } from './client.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * A small server for the sandbox (Node.js in `base`): echoes each request as JSON, streams Server-
 * Sent Events at /sse, and echoes WebSocket text frames (short ones: enough for a test).
 */
const server = String.raw`
const http = require('http'), crypto = require('crypto');
const s = http.createServer((req, res) => {
  if (req.url.startsWith('/sse')) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let i = 0;
    const t = setInterval(() => { res.write('data: ' + ++i + '\n\n'); if (i === 3) { clearInterval(t); res.end(); } }, 100);
    return;
  }
  const body = [];
  req.on('data', (c) => body.push(c));
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-app': 'yes' });
    res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(body).toString() }));
  });
});
s.on('upgrade', (req, sock) => {
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + '\r\n\r\n');
  sock.on('data', (d) => {
    const len = d[1] & 127, mask = d.slice(2, 6);
    const payload = Buffer.from(d.slice(6, 6 + len).map((b, i) => b ^ mask[i % 4]));
    sock.write(Buffer.concat([Buffer.from([0x81, payload.length]), payload]));
  });
});
s.listen(Number(process.argv[2] || 8000));
`;

describe('preview URLs: ports of a sandbox reached from outside', () => {
  let platform: RunningPlatform;
  let admin: Api;
  let tenant: Api;
  let key: string;
  const sessions: string[] = [];
  after(async () => {
    for (const id of sessions.splice(0)) await tenant?.call('DELETE', `/v1/sessions/${id}`);
  });
  platformForSuite(sessions, (p, a) => ((platform = p), (admin = a)));

  const setUp = async (): Promise<string> => {
    const { id: tenantId } = (await admin.call('POST', '/v1/tenants', { name: 'previews' })).body;
    key = (await admin.call('POST', '/v1/keys', { tenantId })).body.key;
    tenant = new Api(platform.url, key);
    const session = await tenant.createSession({ template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(session.id);
    const upload = await fetch(`${platform.url}/v1/sessions/${session.id}/files?path=/workspace/server.js`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}` },
      body: server,
    });
    assert.equal(upload.status, 200);
    await tenant.exec(session.id, ['node', '/workspace/server.js', '8000'], { background: true });
    return session.id;
  };

  test('HTTP both ways, Server-Sent Events and WebSocket through the path form; the API key never reaches the sandbox', { timeout: 120_000 }, async () => {
    const id = await setUp();
    const base = `${platform.url}/v1/sessions/${id}/ports/8000`;
    const echoed = await fetch(`${base}/hello/there?x=1`, { headers: { authorization: `Bearer ${key}`, 'x-custom': 'kept' } });
    assert.equal(echoed.status, 200, 'the first request waits for the server to listen');
    assert.equal(echoed.headers.get('x-app'), 'yes');
    const seen = (await echoed.json()) as { method: string; url: string; headers: Record<string, string> };
    assert.deepEqual([seen.method, seen.url, seen.headers['x-custom']], ['GET', '/hello/there?x=1', 'kept']);
    assert.equal(seen.headers.authorization, undefined, 'the API key stays out of the sandbox');
    assert.equal(seen.headers['x-forwarded-prefix'], `/v1/sessions/${id}/ports/8000`);
    assert.ok(seen.headers['x-forwarded-for'] && seen.headers['x-forwarded-host'], JSON.stringify(seen.headers));

    const big = 'y'.repeat(3 * 1024 * 1024);
    const posted = (await (await fetch(`${base}/upload`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: big })).json()) as {
      body: string;
    };
    assert.equal(posted.body.length, big.length, 'a 3 MB body passes whole');

    const events = await (await fetch(`${base}/sse`, { headers: { authorization: `Bearer ${key}` } })).text();
    assert.equal(events, 'data: 1\n\ndata: 2\n\ndata: 3\n\n');

    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/socket`, { headers: { authorization: `Bearer ${key}` } });
    const echo = await new Promise<string>((resolve, reject) => {
      ws.once('open', () => ws.send('ping through the proxy'));
      ws.once('message', (data) => resolve(data.toString()));
      ws.once('error', reject);
    });
    ws.terminate();
    assert.equal(echo, 'ping through the proxy');

    const ports = (await tenant.call('GET', `/v1/sessions/${id}/ports`)).body.ports as { port: number }[];
    assert.deepEqual(
      ports.map((p) => p.port),
      [8000],
    );
    const nothing = await fetch(`${platform.url}/v1/sessions/${id}/ports/9000/`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(nothing.status, 502);
    assert.equal(((await nothing.json()) as { error: { code: string } }).error.code, 'PORT_NOT_LISTENING');
    assert.equal(
      (await fetch(`${platform.url}/v1/sessions/${id}/ports/49983/`, { headers: { authorization: `Bearer ${key}` } })).status,
      400,
      "the agent's port",
    );
  });

  test('preview tokens: a URL that works without a key (a cookie carries it on), for one port, until it expires or is revoked; other tenants get nothing', {
    timeout: 120_000,
  }, async () => {
    const id = sessions[0] ?? (await setUp());
    const created = (await tenant.call('POST', `/v1/sessions/${id}/preview-tokens/8000`, { ttlSec: 4 })).body;
    const opened = await fetch(created.url, { headers: { authorization: 'Basic YXBwOnNlY3JldA==' } });
    assert.equal(opened.status, 200);
    const seen = (await opened.json()) as { url: string; headers: Record<string, string> };
    assert.equal(seen.url, '/', 'the token is not passed on');
    assert.equal(seen.headers.authorization, 'Basic YXBwOnNlY3JldA==', "the client's own Authorization reaches the app");
    const cookie = opened.headers.get('set-cookie')!.split(';')[0]!;
    assert.match(cookie, /^space_token=pt_/);
    const page = await fetch(`${platform.url}/v1/sessions/${id}/ports/8000/style.css`, { headers: { cookie: `${cookie}; theme=dark` } });
    assert.equal(page.status, 200, "the cookie carries the token to the page's other requests");
    assert.equal(((await page.json()) as { headers: Record<string, string> }).headers.cookie, 'theme=dark', "SPACE's cookie is not passed on, the app's are");
    const token = created.token as string;
    assert.equal((await fetch(`${platform.url}/v1/sessions/${id}/ports/9000/?space_token=${token}`)).status, 403, 'another port');
    assert.equal(
      (await fetch(`${platform.url}/v1/sessions/${id}/exec`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{"cmd":"id"}' })).status,
      403,
      'not an API key',
    );
    await sleep(4500);
    assert.equal((await fetch(created.url)).status, 401, 'expired');

    const revoked = (await tenant.call('POST', `/v1/sessions/${id}/preview-tokens/8000`, { ttlSec: 600 })).body;
    assert.equal((await fetch(revoked.url)).status, 200);
    assert.equal((await tenant.call('DELETE', `/v1/sessions/${id}/preview-tokens/8000`)).body.revoked, 2, 'the expired one and this one');
    assert.equal((await fetch(revoked.url)).status, 401, 'revoked');

    // The same from the CLI, with --json.
    const cli = (...args: string[]) =>
      JSON.parse(
        execFileSync(process.execPath, [cliMain, ...args, '--json'], {
          env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: key },
          encoding: 'utf8',
        }),
      );
    const fromCli = cli('preview', id, '8000', '--ttl', '60');
    assert.equal((await fetch(fromCli.url)).status, 200);
    assert.deepEqual(
      cli('ports', id).ports.map((p: { port: number }) => p.port),
      [8000],
    );
    assert.equal(cli('preview', id, '8000', '--revoke').revoked, 1);

    const { id: otherTenant } = (await admin.call('POST', '/v1/tenants', { name: 'previews-other' })).body;
    const otherKey = (await admin.call('POST', '/v1/keys', { tenantId: otherTenant })).body.key;
    assert.equal((await fetch(`${platform.url}/v1/sessions/${id}/ports/8000/`, { headers: { authorization: `Bearer ${otherKey}` } })).status, 404);
    assert.equal((await fetch(`${platform.url}/v1/sessions/${id}/ports/8000/`)).status, 401, 'no key at all');
  });

  test('services: started with every new sandbox and restarted when they exit, so a request wakes a killed or paused session and is answered', {
    timeout: 180_000,
  }, async () => {
    if (!tenant) await setUp();
    const session = await tenant.createSession({
      template: 'base',
      checkpointIntervalSec: 0,
      fullCheckpointIntervalSec: 0,
      idleTimeoutSec: 0,
      services: [{ name: 'web', cmd: ['node', '-e', server], port: 8000 }],
    });
    sessions.push(session.id);
    assert.deepEqual(
      session.services.map((s: { name: string }) => s.name),
      ['web'],
    );
    const get = (path: string) => fetch(`${platform.url}/v1/sessions/${session.id}/ports/${path}`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal((await get('8000/first')).status, 200, 'the service runs in the first sandbox');

    // Killed: the request resumes the session (a fresh boot: a listening socket keeps full checkpoints away), the service starts, the request is answered.
    await tenant.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    const woke = Date.now();
    const afterKill = await get('8000/after-kill');
    assert.equal(afterKill.status, 200);
    process.stderr.write(`preview: killed session answered ${Date.now() - woke} ms after the request\n`);
    assert.equal(((await afterKill.json()) as { url: string }).url, '/after-kill');

    // Its process ends: the supervisor starts it again.
    await tenant.exec(session.id, ['sh', '-c', 'kill $(pidof node)']);
    let again = 0;
    for (let i = 0; i < 40 && again !== 200; i++) {
      await sleep(250);
      again = (await get('8000/again')).status;
    }
    assert.equal(again, 200, 'restarted after it exited');
    const processes = (await tenant.call('GET', `/v1/sessions/${session.id}/processes`)).body.processes as { cmd: string[]; running: boolean }[];
    assert.ok(
      processes.some((p) => p.running && p.cmd[3] === 'space-service:web'),
      'listed with its name',
    );

    // Paused: woken by the request.
    assert.equal((await tenant.call('POST', `/v1/sessions/${session.id}/pause`)).status, 200);
    assert.equal((await tenant.call('GET', `/v1/sessions/${session.id}`)).body.status, 'idle');
    assert.equal((await get('8000/after-pause')).status, 200);

    // Declared later: started at once; removed: stopped.
    const put = await tenant.call('PUT', `/v1/sessions/${session.id}/services/second`, { cmd: 'python3 -m http.server 8001', port: 8001 });
    assert.deepEqual(put.body.services.map((s: { name: string }) => s.name).sort(), ['second', 'web']);
    assert.equal((await get('8001/')).status, 200);
    assert.equal((await tenant.call('DELETE', `/v1/sessions/${session.id}/services/second`)).status, 200);
    const gone = await get('8001/');
    assert.equal(gone.status, 502, 'stopped with its removal');
    assert.equal((await tenant.call('PUT', `/v1/sessions/${session.id}/services/Bad_Name`, { cmd: 'true' })).status, 400);
    assert.equal((await tenant.call('PUT', `/v1/sessions/${session.id}/services/x`, { cmd: 'true', port: 49983 })).status, 400);
  });
});
