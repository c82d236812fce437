import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readSync, readdirSync, readlinkSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { type Api, metricValue } from './client.js';
import { sandboxHostPid } from './host-state.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';
import { TestUpstream } from './test-upstream.js';

/** Files under `dir` (recursively) that contain `needle`, as grep finds them. */
function filesContaining(dir: string, needle: string): string[] {
  try {
    return execFileSync('grep', ['-rlF', '--no-messages', '--devices=skip', needle, dir], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
      .split('\n')
      .filter(Boolean);
  } catch (err) {
    if ((err as { status?: number }).status === 1) return []; // grep: no match
    throw err;
  }
}

/**
 * Whether `needle` is anywhere in the memory of a gVisor sandbox: every application page lives in
 * the Sentry's memory file (a memfd of the runsc-sandbox process), read here in full.
 */
function sandboxMemoryContains(pid: number, needle: string): { found: boolean; bytes: number } {
  const pattern = Buffer.from(needle);
  let bytes = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target = '';
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    if (!target.startsWith('/memfd:')) continue;
    const handle = openSync(`/proc/${pid}/fd/${fd}`, 'r');
    try {
      const chunk = Buffer.alloc(16 * 1024 * 1024);
      let position = 0;
      for (;;) {
        const read = readSync(handle, chunk, 0, chunk.length, position);
        if (read <= 0) break;
        bytes += read;
        if (chunk.subarray(0, read).includes(pattern)) return { found: true, bytes };
        // Overlap: a match across two reads is still found.
        position += read - pattern.length + 1;
        if (read < chunk.length) break;
      }
    } finally {
      closeSync(handle);
    }
  }
  return { found: false, bytes };
}

describe('credential gateway and egress policy', () => {
  const upstream = new TestUpstream(['api.test.space', 'other.test.space', 'plain.test.space']);
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];
  const value = `sk-live-${Date.now().toString(36)}-b3ca1e5f0a9d`;
  let placeholder = '';
  let sessionId = '';

  const sh = async (id: string, script: string): Promise<{ exitCode: number; stdout: string; stderr: string }> =>
    api.exec(id, ['sh', '-c', script], { timeoutMs: 60_000 });
  /** Status code and body of a request made inside the sandbox with curl. */
  const curl = async (id: string, args: string): Promise<{ status: number; body: string }> => {
    const r = await sh(id, `curl -sS -m 20 -o /tmp/curl-body -w '%{http_code}' ${args}; echo; cat /tmp/curl-body`);
    const [status, ...body] = r.stdout.split('\n');
    return { status: Number(status), body: body.join('\n') };
  };

  // Registered first, so it runs before the platform stops (the data directory outlives the suite).
  after(() => Promise.all(['API_TOKEN', 'API_TOKEN_RO'].map((name) => api?.call('DELETE', `/v1/secrets/${name}`))));
  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)), { upstream });

  test('secrets: the upstream gets the value, the sandbox only ever sees the placeholder', { timeout: 300_000 }, async () => {
    const put = await api.call('PUT', '/v1/secrets/API_TOKEN', { value, hosts: ['api.test.space'] });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    placeholder = put.body.placeholder;
    assert.ok(!JSON.stringify(put.body).includes(value), 'the API never shows a value');
    assert.equal((await api.call('POST', '/v1/sessions', { template: 'base', secrets: ['NOPE'] })).body.error.code, 'SECRET_NOT_FOUND');
    const session = await api.createSession({ template: 'base', secrets: ['API_TOKEN'] });
    sessions.push(session.id);
    sessionId = session.id;
    assert.deepEqual(session.secrets, ['API_TOKEN']);
    assert.equal((await sh(session.id, 'printf %s "$API_TOKEN"')).stdout, placeholder);

    // Header, query and body: swapped on the way to the secret's host; the echo comes back masked.
    const echoed = await curl(session.id, `"https://api.test.space/echo?key=$API_TOKEN" -H "Authorization: Bearer $API_TOKEN" -d "token=$API_TOKEN"`);
    assert.equal(echoed.status, 200, echoed.body);
    const received = upstream.last();
    assert.equal(received.headers.authorization, `Bearer ${value}`);
    assert.equal(received.url, `/echo?key=${value}`);
    assert.equal(received.body, `token=${value}`);
    assert.ok(!echoed.body.includes(value), 'the echoed value reached the sandbox');
    assert.ok(echoed.body.includes(`Bearer ${placeholder}`), echoed.body);

    // Any other host gets the placeholder, unchanged.
    assert.equal((await curl(session.id, `https://other.test.space/echo -H "Authorization: Bearer $API_TOKEN"`)).status, 200);
    assert.equal(upstream.last().headers.authorization, `Bearer ${placeholder}`);
    assert.equal((await curl(session.id, `http://plain.test.space/echo -H "X-Key: $API_TOKEN"`)).status, 200);
    assert.equal(upstream.last().headers['x-key'], placeholder);

    // The usual clients trust the gateway CA: Node.js, Python, git's variables are set as well.
    const node = await sh(
      session.id,
      `node -e "fetch('https://api.test.space/echo',{headers:{authorization:process.env.API_TOKEN}}).then(r=>console.log(r.status))"`,
    );
    assert.equal(node.stdout.trim(), '200', node.stderr);
    assert.equal(upstream.last().headers.authorization, value);
    const python = await sh(session.id, `python3 -c "import urllib.request; print(urllib.request.urlopen('https://api.test.space/echo').status)"`);
    assert.equal(python.stdout.trim(), '200', python.stderr);

    // Nowhere in the sandbox: its files, its processes' environments, its memory; nor in any checkpoint.
    await sh(session.id, `printf %s "$API_TOKEN" > /tmp/placeholder-copy`);
    const full = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
    assert.equal(full.status, 201, JSON.stringify(full.body));
    const fs = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' });
    assert.equal(fs.status, 201);
    const environ = await sh(session.id, 'cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n"');
    assert.ok(environ.stdout.includes(placeholder) && !environ.stdout.includes(value));
    // The session's volume and every checkpoint (fs snapshots, full snapshots and their memory images,
    // which runsc compresses: the memory itself is searched below, uncompressed).
    const storage = [`${platform.dataDir}/btrfs/volumes/${session.id}`, `${platform.dataDir}/btrfs/checkpoints`];
    assert.ok(
      filesContaining(storage[0]!, placeholder).some((f) => f.endsWith('/tmp/placeholder-copy')),
      'control: grep finds the placeholder in the volume',
    );
    assert.ok(
      filesContaining(storage[1]!, placeholder).some((f) => f.includes(fs.body.id)),
      'control: grep finds the placeholder in the fs checkpoint',
    );
    for (const dir of storage) assert.deepEqual(filesContaining(dir, value), [], `the value is in ${dir}`);
    assert.deepEqual(filesContaining(`${platform.dataDir}/node`, value), [], "the value is in the node agent's files");
    // The control plane's store keeps the value encrypted (the name, the control, is in clear).
    const store = [`${platform.dataDir}/space.db`, `${platform.dataDir}/space.db-wal`].filter((f) => existsSync(f));
    assert.ok(
      store.some((f) => filesContaining(f, 'API_TOKEN').length > 0),
      'control: grep finds the secret name in the store',
    );
    for (const f of store) assert.deepEqual(filesContaining(f, value), [], `the value is in clear in ${f}`);
    const pid = sandboxHostPid(platform.dataDir, (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandbox.id);
    assert.equal(sandboxMemoryContains(pid, placeholder).found, true, 'control: the placeholder is found in sandbox memory');
    const memory = sandboxMemoryContains(pid, value);
    assert.equal(memory.found, false, `the value is in the sandbox's memory (${memory.bytes} bytes searched)`);

    // Rotation: the next request carries the new value, same sandbox, same placeholder.
    const sandboxBefore = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandbox.id;
    const rotated = `${value}-rotated`;
    const put2 = await api.call('PUT', '/v1/secrets/API_TOKEN', { value: rotated, hosts: ['api.test.space'] });
    assert.equal(put2.body.placeholder, placeholder);
    assert.equal((await curl(session.id, `https://api.test.space/echo -H "Authorization: Bearer $API_TOKEN"`)).status, 200);
    assert.equal(upstream.last().headers.authorization, `Bearer ${rotated}`);
    assert.equal((await api.call('GET', `/v1/sessions/${session.id}`)).body.sandbox.id, sandboxBefore);
    await api.call('PUT', '/v1/secrets/API_TOKEN', { value, hosts: ['api.test.space'] });

    // A fork of the full checkpoint uses the parent's secret: its memory holds the same placeholder.
    const fork = await api.call('POST', `/v1/checkpoints/${full.body.id}/fork`, { count: 1 });
    assert.equal(fork.status, 201, JSON.stringify(fork.body));
    const child = fork.body.sessions[0];
    sessions.push(child.id);
    assert.deepEqual(child.secrets, ['API_TOKEN']);
    assert.equal((await curl(child.id, `https://api.test.space/echo -H "Authorization: Bearer $API_TOKEN"`)).status, 200);
    assert.equal(upstream.last().headers.authorization, `Bearer ${value}`);

    // A fork with a token of its own under the same name: the placeholder its processes hold from
    // the parent's memory stands for the fork's value in its gateway, never the parent's.
    const readOnly = `${value}-read-only`;
    assert.equal((await api.call('PUT', '/v1/secrets/API_TOKEN_RO', { value: readOnly, hosts: ['api.test.space'] })).status, 200);
    const own = await api.call('POST', `/v1/checkpoints/${full.body.id}/fork`, { count: 1, secrets: [{ name: 'API_TOKEN', secret: 'API_TOKEN_RO' }] });
    assert.equal(own.status, 201, JSON.stringify(own.body));
    const scoped = own.body.sessions[0];
    sessions.push(scoped.id);
    assert.deepEqual(scoped.secrets, [{ name: 'API_TOKEN', secret: 'API_TOKEN_RO' }]);
    assert.equal((await sh(scoped.id, 'printf %s "$API_TOKEN"')).stdout, placeholder);
    assert.equal((await sh(scoped.id, 'cat /tmp/placeholder-copy')).stdout, placeholder, "the parent's placeholder, as its files and memory hold it");
    assert.equal((await curl(scoped.id, `https://api.test.space/echo -H "Authorization: Bearer $(cat /tmp/placeholder-copy)"`)).status, 200);
    assert.equal(upstream.last().headers.authorization, `Bearer ${readOnly}`);

    // Revoked from the first fork only: its next request carries the bare placeholder; the parent
    // and the other fork keep theirs.
    const revoked = await api.call('DELETE', `/v1/sessions/${child.id}/secrets/API_TOKEN`);
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    assert.deepEqual(revoked.body.secrets, []);
    assert.equal((await curl(child.id, `https://api.test.space/echo -H "Authorization: Bearer $(cat /tmp/placeholder-copy)"`)).status, 200);
    assert.equal(upstream.last().headers.authorization, `Bearer ${placeholder}`);
    assert.equal((await curl(session.id, `https://api.test.space/echo -H "Authorization: Bearer $API_TOKEN"`)).status, 200);
    assert.equal(upstream.last().headers.authorization, `Bearer ${value}`);
    assert.equal((await curl(scoped.id, `https://api.test.space/echo -H "Authorization: Bearer $API_TOKEN"`)).status, 200);
    assert.equal(upstream.last().headers.authorization, `Bearer ${readOnly}`);
    const scopedAudit = await api.call('GET', `/v1/sessions/${scoped.id}/egress/audit?limit=50`);
    assert.ok(!JSON.stringify(scopedAudit.body).includes(readOnly));
    assert.ok(
      scopedAudit.body.entries.every((e: any) => e.secrets.join() === 'API_TOKEN'),
      'its own audit log',
    );

    // The audit log names the secret, never its value.
    const audit = await api.call('GET', `/v1/sessions/${session.id}/egress/audit?limit=50`);
    assert.equal(audit.status, 200);
    assert.ok(!JSON.stringify(audit.body).includes(value));
    const injected = audit.body.entries.filter((e: any) => e.secrets.includes('API_TOKEN'));
    assert.ok(injected.length >= 3, JSON.stringify(audit.body.entries));
    assert.deepEqual(Object.keys(injected[0]).sort(), [
      'bytesReceived',
      'bytesSent',
      'decision',
      'durationMs',
      'host',
      'method',
      'path',
      'sandboxId',
      'scheme',
      'secrets',
      'status',
      'time',
    ]);
    assert.equal(injected[0].host, 'api.test.space');
    assert.equal(injected[0].method, 'POST');
    assert.equal(injected[0].status, 200);
    assert.ok(audit.body.entries.some((e: any) => e.host === 'other.test.space' && e.secrets.length === 0));
  });

  test('WebSocket through the gateway: the handshake gets the secret, frames pass both ways', { timeout: 60_000 }, async () => {
    // Debian's Node.js 18 has no WebSocket client: a handshake and one masked text frame by hand.
    const client = `
      const https = require('node:https'), crypto = require('node:crypto');
      const token = process.env.API_TOKEN;
      const req = https.request({ host: 'api.test.space', path: '/ws?key=' + token, headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': crypto.randomBytes(16).toString('base64'), authorization: 'Bearer ' + token } });
      req.on('upgrade', (res, socket) => {
        const payload = Buffer.from('hello ' + token);
        const mask = crypto.randomBytes(4);
        socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, payload.map((b, i) => b ^ mask[i % 4])]));
        socket.once('data', (d) => { console.log(res.statusCode + ' ' + d.subarray(2, 2 + (d[1] & 0x7f)).toString()); socket.destroy(); });
      });
      req.on('response', (res) => console.log('no upgrade: ' + res.statusCode));
      req.end();`;
    await api.call('PUT', `/v1/sessions/${sessionId}/files?path=/tmp/ws-client.js`, undefined, { raw: client });
    const r = await sh(sessionId, 'node /tmp/ws-client.js');
    assert.equal(r.stdout.trim(), `101 hello ${placeholder}`, r.stderr);
    const handshake = upstream.requests.filter((q) => q.url.startsWith('/ws')).at(-1)!;
    assert.equal(handshake.headers.authorization, `Bearer ${value}`);
    assert.equal(handshake.url, `/ws?key=${value}`);
    const audit = (await api.call('GET', `/v1/sessions/${sessionId}/egress/audit?limit=5`)).body.entries;
    const entry = audit.find((e: any) => e.path.startsWith('/ws'));
    assert.deepEqual([entry.status, entry.decision, entry.secrets], [101, 'allowed', ['API_TOKEN']]);
    assert.ok(entry.bytesSent > 0 && entry.bytesReceived > 0);
  });

  test('an upgrade request answered without a 101 is masked like any answer', { timeout: 60_000 }, async () => {
    const r = await curl(sessionId, `-i -H "Connection: Upgrade" -H "Upgrade: websocket" -H "Authorization: Bearer $API_TOKEN" https://api.test.space/echo`);
    assert.equal(r.status, 200, r.body);
    assert.equal(upstream.last().url, '/echo', 'the upstream answered this upgrade request');
    assert.ok(!r.body.includes(value), `the value reached the sandbox: ${r.body}`);
    assert.ok(r.body.includes(`"authorization":"Bearer ${placeholder}"`), r.body);
    assert.match(r.body, new RegExp(`x-echo-authorization: Bearer ${placeholder}`, 'i'));
  });

  test('secrets go only where SNI, Host and the request target all name their host', { timeout: 60_000 }, async () => {
    const before = upstream.requests.length;
    // TLS to the secret's host, but a Host header naming another.
    const fronted = await curl(sessionId, `-H "Host: other.test.space" -H "Authorization: Bearer $API_TOKEN" https://api.test.space/fronted`);
    assert.equal(fronted.status, 403, fronted.body);
    assert.match(fronted.body, /Host header.*does not name the TLS server name api\.test\.space/);
    // An absolute-form target naming another host than the Host header (the secret's own, over plain HTTP here).
    await api.call('PUT', '/v1/secrets/PLAIN_TOKEN', { value: `${value}-plain`, hosts: ['plain.test.space'] });
    const plain = await api.createSession({ template: 'base', secrets: ['PLAIN_TOKEN'] });
    sessions.push(plain.id);
    const absolute = await sh(
      plain.id,
      `printf 'GET http://other.test.space/abs?k=%s HTTP/1.1\\r\\nHost: plain.test.space\\r\\nConnection: close\\r\\n\\r\\n' "$PLAIN_TOKEN" | curl -sS -m 10 telnet://plain.test.space:80 || true`,
    );
    assert.match(absolute.stdout, /^HTTP\/1\.1 403/, absolute.stdout + absolute.stderr);
    assert.match(absolute.stdout, /request target http:\/\/other\.test\.space\/abs.* does not name plain\.test\.space/);
    await api.call('DELETE', '/v1/secrets/PLAIN_TOKEN');
    const leaked = upstream.requests.slice(before).filter((q) => JSON.stringify(q).includes(value));
    assert.deepEqual(leaked, [], 'no request carrying a value reached an upstream');
  });

  test('gateway connections: only from sandboxes, none left after their sandbox or the gateway stops', { timeout: 60_000 }, async () => {
    // From the host (not a redirected sandbox link): closed before any TLS work or HTTP answer. The
    // gateway's ports are the platform's listeners on every address.
    const gatewayPid = platform.process.pid!;
    const ports = execFileSync('sh', ['-c', `ss -Htlnp | grep 'pid=${gatewayPid},' | awk '{print $4}' | grep '^0.0.0.0:' | cut -d: -f2`], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
    assert.equal(ports.length, 2, 'the gateway listens on two ports (HTTP, HTTPS)');
    for (const port of ports)
      for (const scheme of ['http', 'https']) {
        const r = execFileSync('sh', ['-c', `curl -sk -m 5 -o /dev/null -w '%{http_code}' ${scheme}://127.0.0.1:${port}/ ; true`], { encoding: 'utf8' }).trim();
        assert.equal(r, '000', `${scheme} to the gateway's port ${port} from the host answered ${r}`);
      }
    // Upgraded connections left open by a sandbox are closed when the sandbox goes.
    const s = await api.createSession({ template: 'base' });
    sessions.push(s.id);
    await api.exec(s.id, [
      'sh',
      '-c',
      `(curl -sN -m 600 -H "Connection: Upgrade" -H "Upgrade: websocket" -H "Sec-WebSocket-Version: 13" -H "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==" https://api.test.space/ws >/dev/null 2>&1 &) ; sleep 1`,
    ]);
    const upgraded = () => upstream.requests.filter((q) => q.url === '/ws').length;
    assert.ok(upgraded() > 0);
    const established = () =>
      execFileSync('sh', ['-c', `ss -Htnp state established '( sport = :${ports[0]} or sport = :${ports[1]} )' | grep -c 'pid=${gatewayPid},' || true`], {
        encoding: 'utf8',
      }).trim();
    assert.notEqual(established(), '0', 'the upgraded connection is open');
    await api.call('POST', `/v1/sessions/${s.id}/sandbox/kill`);
    assert.equal(established(), '0', 'no gateway connection of the killed sandbox is left');
  });

  test('request bodies: chunked ones are rewritten as they stream, large ones pass intact', { timeout: 60_000 }, async () => {
    // A chunked upload sent in pieces as its input arrives (splits inside a placeholder: unit tests).
    const chunked = await sh(
      sessionId,
      `(printf 'start-'; sleep 0.2; printf '%s' "$API_TOKEN"; sleep 0.2; printf -- '-end') | curl -sS -m 20 -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' -T - https://api.test.space/echo`,
    );
    assert.equal(chunked.stdout, '200', chunked.stderr);
    assert.equal(upstream.last().body, `start-${value}-end`);
    // 2 MiB (past the 1 MiB rewrite limit, with Expect: 100-continue): forwarded byte for byte.
    await sh(sessionId, 'head -c 2097152 /dev/urandom > /tmp/big.bin && sha256sum /tmp/big.bin | cut -c1-64 > /tmp/big.sha');
    const big = await sh(
      sessionId,
      `curl -sS -m 30 -o /dev/null -w '%{http_code}' --data-binary @/tmp/big.bin https://api.test.space/echo; echo; cat /tmp/big.sha`,
    );
    const [status, sha] = big.stdout.trim().split('\n');
    assert.equal(status, '200', big.stderr);
    assert.equal(upstream.last().headers['content-length'], '2097152');
    assert.equal(upstream.last().sha256, sha);
  });

  test('a sandbox that hangs up before the upstream answers: the answer goes nowhere, the gateway serves on', { timeout: 60_000 }, async () => {
    // The answer came after the connection closed and was piped into it: that threw, and took the node down.
    const gaveUp = await sh(sessionId, "curl -sS -m 1 -o /dev/null 'https://api.test.space/slow?ms=2500'; echo $?");
    assert.equal(gaveUp.stdout.trim(), '28', gaveUp.stderr);
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal((await curl(sessionId, 'https://api.test.space/echo')).status, 200);
  });

  test('egress policy: deny-all, domain and CIDR allow-lists, changed on a running session', { timeout: 120_000 }, async () => {
    const session = await api.createSession({ template: 'base', egress: { mode: 'deny-all' } });
    sessions.push(session.id);
    const denied = await curl(session.id, 'https://api.test.space/echo');
    assert.equal(denied.status, 403);
    assert.match(denied.body, /SPACE gateway: egress to api\.test\.space denied: .*deny-all/);
    const before = upstream.requests.length;

    const bad = await api.call('PUT', `/v1/sessions/${session.id}/egress`, { mode: 'allow-list' });
    assert.equal(bad.status, 400, 'an allow-list without entries is refused');
    const list = await api.call('PUT', `/v1/sessions/${session.id}/egress`, { mode: 'allow-list', domains: ['api.test.space'] });
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.deepEqual(list.body.egress, { mode: 'allow-list', domains: ['api.test.space'], cidrs: [] });
    assert.equal((await curl(session.id, 'https://api.test.space/echo')).status, 200);
    assert.equal((await curl(session.id, 'https://other.test.space/echo')).status, 403);
    await api.call('PUT', `/v1/sessions/${session.id}/egress`, { mode: 'allow-list', domains: ['*.test.space'] });
    assert.equal((await curl(session.id, 'https://other.test.space/echo')).status, 200);
    assert.equal(upstream.requests.length, before + 2, 'denied requests never reached the upstream');

    // CIDRs decide for addresses: a listed network is let through (to an address that does not answer here), another is not.
    await api.call('PUT', `/v1/sessions/${session.id}/egress`, { mode: 'allow-list', cidrs: ['192.0.2.0/24'] });
    const listed = await curl(session.id, 'http://192.0.2.7/');
    assert.notEqual(listed.status, 403, listed.body);
    const unlisted = await curl(session.id, 'http://198.51.100.7/');
    assert.equal(unlisted.status, 403);
    assert.match(unlisted.body, /neither in the session's allowed domains nor in its allowed CIDRs/);
    const audit = (await api.call('GET', `/v1/sessions/${session.id}/egress/audit`)).body.entries as { host: string; decision: string }[];
    const decisions = (host: string): string[] => audit.filter((e) => e.host === host).map((e) => e.decision);
    assert.deepEqual(decisions('api.test.space'), ['denied', 'allowed']);
    assert.deepEqual(decisions('other.test.space'), ['denied', 'allowed']);
    assert.deepEqual(decisions('198.51.100.7'), ['denied']);
    // The platform's /metrics counts what the gateways answered, by decision.
    const metrics = await (await fetch(`${platform.url}/metrics`)).text();
    assert.ok(metricValue(metrics, 'space_gateway_requests{decision="denied"}') >= 3, metrics);
    assert.ok(metricValue(metrics, 'space_gateway_requests{decision="allowed"}') >= 2);
  });

  test('the gateway is the only way out: no host loopback, no platform, no other sandbox', { timeout: 120_000 }, async () => {
    const [a, b] = [await api.createSession({ template: 'base' }), await api.createSession({ template: 'base' })];
    sessions.push(a.id, b.id);
    assert.equal((await sh(a.id, 'getent hosts api.test.space')).stdout.trim().split(/\s+/)[0], '198.18.0.1');
    const ip = (
      JSON.parse(execFileSync('cat', [`${platform.dataDir}/node/sandboxes/${b.sandbox.id}/record.json`], { encoding: 'utf8' })) as { sandboxIp: string }
    ).sandboxIp;
    const apiPort = new URL(platform.url).port;
    for (const target of [
      '-H "Host: localhost" http://198.18.0.1/',
      `-H "Host: 127.0.0.1:${apiPort}" http://198.18.0.1/healthz`,
      `http://${ip}/`,
      'http://169.254.169.254/latest/meta-data/',
      'https://localhost.test.invalid/',
    ]) {
      const r = await curl(a.id, target);
      assert.ok(r.status === 403 || r.status === 0, `${target}: ${r.status} ${r.body}`);
      assert.ok(!r.body.includes('"ok":true'));
    }
    // Other ports go nowhere at all: not to the platform's API, not to another sandbox's daemon.
    for (const target of [`http://198.18.0.1:${apiPort}/healthz`, `http://${ip}:49983/health`]) {
      const r = await sh(a.id, `curl -sS -m 3 ${target}`);
      assert.notEqual(r.exitCode, 0, `${target} answered: ${r.stdout}`);
    }
  });
});
