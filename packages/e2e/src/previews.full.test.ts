import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { WebSocket } from 'ws';
import { Api } from './client.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The wildcard domain the suite's platform serves preview hosts under, and its bound on connections per session. */
const previewDomain = 'preview.test';
const maxConnections = 4;

/** A request to the platform as if `host` resolved to it (no DNS here): the Host header names the preview host. */
function viaHost(platformUrl: string, host: string, path: string, init: { method?: string; headers?: Record<string, string> } = {}): http.ClientRequest {
  const { port } = new URL(platformUrl);
  return http.request({ host: '127.0.0.1', port, path, method: init.method ?? 'GET', headers: { ...init.headers, host: `${host}:${port}` }, agent: false });
}

function answer(req: http.ClientRequest, body?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.once('error', reject);
    req.end(body);
  });
}

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
  const protocol = String(req.headers['sec-websocket-protocol'] || '').split(',')[0].trim();
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + (protocol ? '\r\nSec-WebSocket-Protocol: ' + protocol : '') + '\r\n\r\n');
  // /ws-headers: the first frame is the handshake's headers, as JSON (short: enough for a test).
  if (req.url.startsWith('/ws-headers')) {
    const seen = Buffer.from(JSON.stringify(req.headers));
    sock.write(Buffer.concat([Buffer.from([0x81, 126, seen.length >> 8, seen.length & 255]), seen]));
  }
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
  platformForSuite(sessions, (p, a) => ((platform = p), (admin = a)), {
    env: { SPACE_PREVIEW_DOMAIN: previewDomain, SPACE_PREVIEW_MAX_CONNECTIONS: String(maxConnections) },
  });

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

  test("SPACE's credentials never reach the app, in any header, whichever of them authenticated the request", { timeout: 120_000 }, async () => {
    const id = sessions[0] ?? (await setUp());
    const base = `${platform.url}/v1/sessions/${id}/ports/8000`;
    const { token: sessionToken } = (await tenant.call('POST', `/v1/sessions/${id}/tokens`)).body;
    const { token: previewToken } = (await tenant.call('POST', `/v1/sessions/${id}/preview-tokens/8000`, { ttlSec: 600 })).body;
    const seenBy = async (url: string, headers: Record<string, string>) =>
      ((await (await fetch(url, { headers })).json()) as { headers: Record<string, string> }).headers;

    // A preview token authenticates; the API key beside it in Authorization, and in E2B's headers, stays out.
    let seen = await seenBy(`${base}/?space_token=${previewToken}`, { authorization: `Bearer ${key}`, 'x-api-key': key, 'x-access-token': sessionToken });
    assert.deepEqual([seen.authorization, seen['x-api-key'], seen['x-access-token']], [undefined, undefined, undefined], JSON.stringify(seen));
    // The app's own values in the same headers pass.
    seen = await seenBy(`${base}/?space_token=${previewToken}`, { authorization: 'Bearer app-own-token', 'x-api-key': 'app-key' });
    assert.deepEqual([seen.authorization, seen['x-api-key']], ['Bearer app-own-token', 'app-key']);
    // The console's cookie is not passed on either.
    seen = await seenBy(`${base}/`, { authorization: `Bearer ${key}`, cookie: `space_console=${key}; theme=dark` });
    assert.equal(seen.cookie, 'theme=dark');
    // A public port: a token that does not authorize this request (another session's, another port's) is still SPACE's, and stays out.
    const other = await tenant.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(other.id);
    const { token: otherSessionToken } = (await tenant.call('POST', `/v1/sessions/${other.id}/tokens`)).body;
    const { token: otherPortToken } = (await tenant.call('POST', `/v1/sessions/${id}/preview-tokens/9000`, { ttlSec: 600 })).body;
    await tenant.call('PUT', `/v1/sessions/${id}/public-ports/8000`);
    try {
      for (const credential of [otherSessionToken, otherPortToken, sessionToken, key]) {
        seen = await seenBy(`${base}/`, { authorization: `Bearer ${credential}` });
        assert.equal(seen.authorization, undefined, `${credential.slice(0, 3)}… reached the app`);
      }
      assert.equal((await seenBy(`${base}/`, { authorization: 'Bearer app-own-token' })).authorization, 'Bearer app-own-token');
    } finally {
      await tenant.call('DELETE', `/v1/sessions/${id}/public-ports/8000`);
    }
    // A WebSocket with the key as the console sends it (a subprotocol): the app sees its own subprotocols only.
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/ws-headers`, ['space', `space-key.${key}`, 'chat'], { headers: { 'x-api-key': key } });
    ws.on('error', () => undefined);
    const handshake = await new Promise<Record<string, string>>((resolve, reject) => {
      ws.once('message', (data) => resolve(JSON.parse(data.toString())));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade answered ${res.statusCode}`)));
      setTimeout(() => reject(new Error('no frame')), 10_000);
    });
    ws.terminate();
    assert.equal(handshake['sec-websocket-protocol'], 'chat');
    assert.ok(!JSON.stringify(handshake).includes(key), JSON.stringify(handshake));
  });

  test('the path form is served on the API origin in a sandbox of its own (an opaque origin); the host form is not', { timeout: 60_000 }, async () => {
    const id = sessions[0] ?? (await setUp());
    const pathForm = await fetch(`${platform.url}/v1/sessions/${id}/ports/8000/page`, { headers: { authorization: `Bearer ${key}` } });
    assert.match(pathForm.headers.get('content-security-policy') ?? '', /^sandbox allow-scripts/);
    assert.doesNotMatch(pathForm.headers.get('content-security-policy') ?? '', /allow-same-origin/);
    const hostForm = await answer(viaHost(platform.url, `8000-${id}.${previewDomain}`, '/page', { headers: { authorization: `Bearer ${key}` } }));
    assert.equal(hostForm.status, 200);
    assert.equal(hostForm.headers['content-security-policy'], undefined);
  });

  test('the host form <port>-<session>.<domain>: HTTP, WebSocket, tokens scoped to their port; a slow client holds a bounded number of connections; public ports', {
    timeout: 120_000,
  }, async () => {
    const id = sessions[0] ?? (await setUp());
    const host = `8000-${id.slice(4)}.${previewDomain}`;
    const b = (k: string) => new Api(platform.url, k);
    const keyed = { authorization: `Bearer ${key}` };
    const echoed = await answer(viaHost(platform.url, host, '/v1/sessions?x=1', { headers: keyed }));
    assert.equal(echoed.status, 200, echoed.body);
    const seen = JSON.parse(echoed.body) as { url: string; headers: Record<string, string> };
    assert.equal(seen.url, '/v1/sessions?x=1', "every path of the host is the app's, /v1 included");
    assert.equal(seen.headers['x-forwarded-prefix'], undefined, 'served at the root');
    assert.equal(seen.headers['x-forwarded-host'], `${host}:${new URL(platform.url).port}`);
    assert.equal(seen.headers.authorization, undefined);
    const withPrefix = await answer(viaHost(platform.url, `8000-${id}.${previewDomain}`, '/', { headers: keyed }));
    assert.equal(withPrefix.status, 200, 'the whole session id (as E2B names a sandbox) works too');

    const ws = new WebSocket(`${platform.url.replace(/^http/, 'ws')}/socket`, { headers: { ...keyed, host: `${host}:${new URL(platform.url).port}` } });
    const echo = await new Promise<string>((resolve, reject) => {
      ws.once('open', () => ws.send('ping through the host form'));
      ws.once('message', (data) => resolve(data.toString()));
      ws.once('error', reject);
    });
    ws.terminate();
    assert.equal(echo, 'ping through the host form');

    // A preview token: its host URL works without a key and leaves a cookie for that host; another port's host refuses it.
    const created = (await tenant.call('POST', `/v1/sessions/${id}/preview-tokens/8000`, { ttlSec: 60 })).body;
    const hostUrl = new URL(created.hostUrl);
    assert.equal(hostUrl.host, `${host}:${new URL(platform.url).port}`);
    const opened = await answer(viaHost(platform.url, host, hostUrl.pathname + hostUrl.search));
    assert.equal(opened.status, 200, opened.body);
    const cookie = String(opened.headers['set-cookie']).split(';')[0]!;
    assert.match(String(opened.headers['set-cookie']), /Path=\/;/);
    assert.equal((await answer(viaHost(platform.url, host, '/app.js', { headers: { cookie } }))).status, 200, 'the cookie carries it on');
    assert.equal((await answer(viaHost(platform.url, `9000-${id.slice(4)}.${previewDomain}`, '/', { headers: { cookie } }))).status, 403);
    assert.equal((await answer(viaHost(platform.url, host, '/'))).status, 401, 'no key, no token');
    const { id: otherTenant } = (await admin.call('POST', '/v1/tenants', { name: 'previews-host-other' })).body;
    const otherKey = (await admin.call('POST', '/v1/keys', { tenantId: otherTenant })).body.key;
    assert.equal((await answer(viaHost(platform.url, host, '/', { headers: { authorization: `Bearer ${otherKey}` } }))).status, 404);
    assert.equal((await answer(viaHost(platform.url, `8000-nosuchsession.${previewDomain}`, '/', { headers: keyed }))).status, 404);
    assert.equal((await answer(viaHost(platform.url, `x-${id.slice(4)}.${previewDomain}`, '/healthz'))).status, 200, 'not a preview host: the API');

    // Slow clients: requests whose bodies never end hold the session's connections up to the bound, then are refused; freed, it serves again.
    const slow = Array.from({ length: maxConnections }, () => {
      const req = viaHost(platform.url, host, '/slow', { method: 'POST', headers: { ...keyed, 'content-length': '1000000' } });
      req.on('error', () => undefined);
      req.write('a trickle');
      return req;
    });
    await sleep(1500);
    const refused = await answer(viaHost(platform.url, host, '/', { headers: keyed }));
    assert.equal(refused.status, 429, refused.body);
    assert.equal(JSON.parse(refused.body).error.code, 'TOO_MANY_REQUESTS');
    assert.match(JSON.parse(refused.body).error.message, /SPACE_PREVIEW_MAX_CONNECTIONS/);
    assert.equal((await fetch(`${platform.url}/v1/sessions/${id}/ports/8000/`, { headers: keyed })).status, 429, 'both forms count');
    for (const req of slow) req.destroy();
    await sleep(500);
    assert.equal((await answer(viaHost(platform.url, host, '/', { headers: keyed }))).status, 200);

    // A public port: anyone reaches it, in both forms; the app's own Authorization passes through; private again, it is closed.
    const made = await tenant.call('PUT', `/v1/sessions/${id}/public-ports/8000`);
    assert.deepEqual(made.body.publicPorts, [8000]);
    assert.equal((await answer(viaHost(platform.url, host, '/'))).status, 200);
    const appAuth = await fetch(`${platform.url}/v1/sessions/${id}/ports/8000/`, { headers: { authorization: 'Basic YXBwOnNlY3JldA==' } });
    assert.equal(((await appAuth.json()) as { headers: Record<string, string> }).headers.authorization, 'Basic YXBwOnNlY3JldA==');
    assert.equal((await fetch(`${platform.url}/v1/sessions/${id}/ports/9000/`)).status, 401, 'only that port');
    assert.equal((await b(otherKey).call('PUT', `/v1/sessions/${id}/public-ports/9000`)).status, 404, "another tenant cannot open a session's port");
    const cliPrivate = JSON.parse(
      execFileSync(process.execPath, [cliMain, 'preview', id, '8000', '--private', '--json'], {
        env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: key },
        encoding: 'utf8',
      }),
    );
    assert.deepEqual(cliPrivate.publicPorts, []);
    assert.equal((await answer(viaHost(platform.url, host, '/'))).status, 401);
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
