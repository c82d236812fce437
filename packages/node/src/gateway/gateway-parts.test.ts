import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect as tlsConnect, createServer as createTlsServer } from 'node:tls';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { EgressPolicySchema } from '@space/protocol';
import { answerQuery } from './dns-responder.js';
import { namedElsewhere, parseHost } from './request-host.js';
import { EgressRules, hostMatches } from './egress-rules.js';
import { GatewayCa } from './gateway-ca.js';
import { GatewayConnections } from './gateway-connections.js';
import { SecretRewriter } from './secret-rewriter.js';
import { parseTestHosts, readNodeSettings } from '../node-config.js';

const policy = (p: unknown) => EgressPolicySchema.parse(p);

test('host patterns: exact names, and wildcards for names below (not the apex)', () => {
  assert.ok(hostMatches('api.example.com', 'api.example.com'));
  assert.ok(!hostMatches('api.example.com', 'x.api.example.com'));
  assert.ok(hostMatches('*.example.com', 'a.example.com'));
  assert.ok(hostMatches('*.example.com', 'a.b.example.com'));
  assert.ok(!hostMatches('*.example.com', 'example.com'));
  assert.ok(!hostMatches('*.example.com', 'badexample.com'));
});

test('egress rules: modes, domains, CIDRs, private and never-reachable addresses', async () => {
  const dns: Record<string, string[]> = {
    'public.example': ['203.0.113.9'],
    'internal.example': ['10.1.2.3'],
    'sneaky.example': ['127.0.0.1'],
    'mapped.example': ['::ffff:127.0.0.1'],
    'mixed.example': ['127.0.0.1', '203.0.113.10'],
  };
  const rules = new EgressRules(async (host) => dns[host] ?? Promise.reject(Object.assign(new Error('nx'), { code: 'ENOTFOUND' })), {
    hostAddresses: ['192.0.2.50'],
  });
  const all = policy({});
  assert.deepEqual(await rules.decide(all, 'public.example'), { allowed: true, address: '203.0.113.9' });
  assert.equal((await rules.decide(all, 'internal.example')).allowed, false, 'private addresses need the session to name them');
  for (const host of ['sneaky.example', 'mapped.example', '169.254.169.254', '10.213.0.6', '192.0.2.50', '127.0.0.1', '::1']) {
    assert.equal((await rules.decide(all, host)).allowed, false, host);
    assert.equal((await rules.decide(policy({ mode: 'allow-list', cidrs: ['0.0.0.0/0', '::/0'] }), host)).allowed, false, `${host} even when listed`);
  }
  assert.deepEqual(await rules.decide(all, 'mixed.example'), { allowed: true, address: '203.0.113.10' }, 'the first acceptable address is used');
  assert.match(((await rules.decide(all, 'nowhere.example')) as { reason: string }).reason, /does not resolve: ENOTFOUND/);
  assert.match(((await rules.decide(policy({ mode: 'deny-all' }), 'public.example')) as { reason: string }).reason, /deny-all/);
  const list = policy({ mode: 'allow-list', domains: ['*.example'], cidrs: ['198.51.100.0/24'] });
  assert.deepEqual(await rules.decide(list, 'internal.example'), { allowed: true, address: '10.1.2.3' }, 'a named domain may be private');
  assert.deepEqual(await rules.decide(list, '198.51.100.4'), { allowed: true, address: '198.51.100.4' });
  assert.equal((await rules.decide(list, '198.51.101.4')).allowed, false);
  assert.equal((await rules.decide(policy({ mode: 'allow-list', domains: ['a.example'] }), 'public.example')).allowed, false);
  assert.deepEqual(
    await rules.decide(policy({ mode: 'allow-list', domains: ['t.test'] }), 't.test', '127.0.0.1'),
    { allowed: true, address: '127.0.0.1' },
    'a pinned (test) host skips the address checks',
  );
  assert.equal((await rules.decide(policy({ mode: 'allow-list', domains: ['a.test'] }), 't.test', '127.0.0.1')).allowed, false);
});

test('IPv6: off by default; when on, every form that embeds a blocked IPv4 address or means this host is refused', async () => {
  const dns: Record<string, string[]> = { 'v6only.example': ['2001:db8::1'], 'dual.example': ['2001:db8::1', '203.0.113.9'] };
  const resolve = async (host: string) => dns[host] ?? [];
  const all = policy({});
  const open = policy({ mode: 'allow-list', cidrs: ['0.0.0.0/0', '::/0'] });
  const off = new EgressRules(resolve, { hostAddresses: [] });
  assert.match(((await off.decide(all, '2606:4700::1111')) as { reason: string }).reason, /IPv6 egress is off.*SPACE_EGRESS_IPV6/);
  assert.equal((await off.decide(all, 'v6only.example')).allowed, false);
  assert.deepEqual(await off.decide(all, 'dual.example'), { allowed: true, address: '203.0.113.9' }, 'a name with both families goes over IPv4');
  const on = new EgressRules(resolve, { hostAddresses: ['fe80::1%eth0', '2001:db8:5::7'], ipv6: true });
  assert.deepEqual(await on.decide(all, '2606:4700::1111'), { allowed: true, address: '2606:4700:0:0:0:0:0:1111' });
  const refused = [
    '::1',
    '::',
    '::7f00:1', // IPv4-compatible 127.0.0.1
    '::127.0.0.1',
    '::a9fe:a9fe', // 169.254.169.254
    '::ffff:7f00:1', // IPv4-mapped, hex
    '::ffff:127.0.0.1',
    '::FFFF:169.254.169.254',
    '0:0:0:0:0:ffff:a00:1', // mapped 10.0.0.1 (private: not listed here by a domain)
    '::ffff:0:7f00:1', // IPv4-translated
    '64:ff9b::7f00:1', // NAT64
    '64:ff9b::127.0.0.1',
    '64:ff9b:1::a9fe:a9fe',
    '2002:7f00:1::', // 6to4 of 127.0.0.1
    '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
    'fec0::1', // site-local
    'fe80::1',
    'ff02::1',
    '2001:db8:5::7', // this host's own
    '2001:DB8:5:0:0:0:0:7',
  ];
  for (const host of refused) {
    assert.equal((await on.decide(all, host)).allowed, false, `${host} (allow-all)`);
    const listed = await on.decide(open, host);
    assert.equal(listed.allowed, host === '0:0:0:0:0:ffff:a00:1', `${host} (every CIDR listed): ${JSON.stringify(listed)}`);
  }
  for (const host of refused) assert.equal((await off.decide(open, host)).allowed, host === '0:0:0:0:0:ffff:a00:1', `${host} with IPv6 off`);
  assert.equal(parseHost('[::127.0.0.1]'), '::127.0.0.1');
});

test('a request names one host: over TLS the Host header is the SNI host, an absolute-form target the request host', () => {
  const req = (host: string | undefined, url: string) => ({ headers: { host }, url });
  assert.equal(namedElsewhere(req('api.example.com', '/x'), 'api.example.com', true), null);
  assert.equal(namedElsewhere(req('API.example.com:443', '/x'), 'api.example.com', true), null);
  assert.match(namedElsewhere(req('other.example', '/x'), 'api.example.com', true) ?? '', /Host header \(other\.example\) does not name the TLS server name/);
  assert.match(namedElsewhere(req(undefined, '/x'), 'api.example.com', true) ?? '', /does not name/);
  assert.equal(namedElsewhere(req('api.example.com', 'http://api.example.com/abs'), 'api.example.com', false), null);
  assert.match(namedElsewhere(req('api.example.com', 'http://other.example/abs?k=1'), 'api.example.com', false) ?? '', /request target .* does not name/);
  assert.match(namedElsewhere(req('api.example.com', 'garbage'), 'api.example.com', false) ?? '', /does not name/);
  assert.equal(namedElsewhere(req('api.example.com', '*'), 'api.example.com', false), null);
});

test('egress policy schema: clear errors for bad input', () => {
  assert.equal(EgressPolicySchema.safeParse({ mode: 'allow-list' }).success, false);
  assert.equal(EgressPolicySchema.safeParse({ mode: 'deny-all', domains: ['a.com'] }).success, false);
  assert.equal(EgressPolicySchema.safeParse({ mode: 'allow-list', domains: ['bad domain'] }).success, false);
  assert.equal(EgressPolicySchema.safeParse({ mode: 'allow-list', cidrs: ['10.0.0.0/33'] }).success, false);
  assert.deepEqual(policy({ mode: 'allow-list', domains: ['API.Example.com.'] }).domains, ['api.example.com']);
});

test('secret rewriter: strings, buffers, and streams with placeholders split across chunks', async () => {
  const swap = new SecretRewriter([
    { name: 'A', from: 'PH_A_123456', to: 'value-a' },
    { name: 'B', from: 'PH_B', to: 'value-b-longer' },
  ]);
  assert.equal(swap.rewrite('x PH_A_123456 y PH_A_123456'), 'x value-a y value-a');
  assert.deepEqual([...swap.used], ['A']);
  const input = 'start PH_A_123456 middle PH_B end PH_A_12345 not-a-match PH_B';
  const expected = 'start value-a middle value-b-longer end PH_A_12345 not-a-match value-b-longer';
  assert.equal(swap.rewriteBuffer(Buffer.from(input)).toString(), expected);
  for (let size = 1; size <= input.length; size++) {
    const chunks: Buffer[] = [];
    for (let i = 0; i < input.length; i += size) chunks.push(Buffer.from(input.slice(i, i + size)));
    const out: Buffer[] = [];
    for await (const chunk of Readable.from(chunks).pipe(swap.stream())) out.push(chunk as Buffer);
    assert.equal(Buffer.concat(out).toString(), expected, `chunk size ${size}`);
  }
});

test('DNS answers: every A question gets the gateway address; anything malformed is dropped', () => {
  const question = Buffer.concat([
    Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]),
    Buffer.from([3, ...Buffer.from('api'), 7, ...Buffer.from('example'), 3, ...Buffer.from('com'), 0]),
    Buffer.from([0, 1, 0, 1]),
  ]);
  const reply = answerQuery(question, '198.18.0.1')!;
  assert.equal(reply.readUInt16BE(0), 0x1234);
  assert.equal(reply.readUInt16BE(2) & 0x8000, 0x8000);
  assert.equal(reply.readUInt16BE(6), 1);
  assert.deepEqual([...reply.subarray(-4)], [198, 18, 0, 1]);
  const aaaa = Buffer.from(question);
  aaaa.writeUInt16BE(28, aaaa.length - 4);
  assert.equal(answerQuery(aaaa, '198.18.0.1')!.readUInt16BE(6), 0, 'no AAAA answer: clients use IPv4');
  assert.equal(answerQuery(question.subarray(0, 20), '198.18.0.1'), null, 'truncated');
  assert.equal(answerQuery(Buffer.concat([question.subarray(0, 12), Buffer.from([0xc0, 0x0c, 0, 1, 0, 1])]), '198.18.0.1'), null, 'compression pointer');
  const response = Buffer.from(question);
  response.writeUInt16BE(0x8100, 2);
  assert.equal(answerQuery(response, '198.18.0.1'), null, 'a response is never answered');
  assert.equal(answerQuery(Buffer.alloc(600), '198.18.0.1'), null);
});

test('host names from Host headers and SNI; test host settings', () => {
  assert.equal(parseHost('API.example.com:8080'), 'api.example.com');
  assert.equal(parseHost('[2001:db8::1]:443'), '2001:db8::1');
  assert.equal(parseHost('203.0.113.5'), '203.0.113.5');
  assert.equal(parseHost('bad host'), null);
  assert.equal(parseHost('a/b'), null);
  assert.equal(parseHost(undefined), null);
  assert.deepEqual(
    [...parseTestHosts('a.test=127.0.0.1:8443, b.test=127.0.0.1:80')],
    [
      ['a.test', { address: '127.0.0.1', port: 8443 }],
      ['b.test', { address: '127.0.0.1', port: 80 }],
    ],
  );
  assert.throws(() => readNodeSettings({ SPACE_GATEWAY_TEST_HOSTS: 'a.test=localhost:1' }), /SPACE_GATEWAY_TEST_HOSTS must be name=ip:port entries/);
});

test('gateway CA: certificates chain to the CA; issuing is bounded (2 at a time, 64 waiting)', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-ca-'));
  try {
    const ca = new GatewayCa(dir);
    await ca.load();
    assert.equal(statSync(path.join(dir, 'ca.key')).mode & 0o777, 0o600);
    const names = Array.from({ length: 80 }, (_, i) => `h${i}.example.com`);
    const results = await Promise.allSettled(names.map((n) => ca.contextFor(n)));
    assert.equal(ca.peakRunning, 2);
    const refused = results.filter((r) => r.status === 'rejected');
    assert.equal(refused.length, 80 - 2 - 64, 'past the queue, handshakes fail instead of piling up');
    assert.match(String((refused[0] as PromiseRejectedResult).reason), /too many certificates being issued/);
    // The leaf really chains to the CA for its name (checked by Node's own TLS verification).
    const server = createTlsServer({ SNICallback: (name, cb) => void ca.contextFor(name).then((c) => cb(null, c), cb) }, (s) => s.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const reply = await new Promise<string>((resolve, reject) => {
      const socket = tlsConnect({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', servername: 'h1.example.com', ca: ca.certificatePem }, () =>
        socket.once('data', (d) => resolve(d.toString())),
      );
      socket.on('error', reject);
    });
    server.close();
    assert.equal(reply, 'ok');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('gateway connections: one sandbox waits on at most 8 new certificates; handshakes for a name being issued join it', async () => {
  const connections = new GatewayConnections(
    (ip) => (ip === '10.213.0.2' ? { sandboxId: 'sbx_a', sessionId: 'ses_a' } : { sandboxId: 'sbx_b', sessionId: 'ses_b' }) as never,
  );
  const socketFrom = (remoteAddress: string) =>
    Object.assign(new EventEmitter(), { remoteAddress, setTimeout: () => undefined, destroy: () => undefined }) as never;
  const a = socketFrom('10.213.0.2');
  const b = socketFrom('10.213.0.6');
  assert.ok(connections.accept(a) && connections.accept(b));
  const release: (() => void)[] = [];
  const slow = () => new Promise<string>((resolve) => release.push(() => resolve('issued')));
  const first = Array.from({ length: 8 }, (_, i) => connections.issueFor(a, `n${i}.example`, slow));
  const joined = Array.from({ length: 20 }, () => connections.issueFor(a, 'n0.example', slow));
  await assert.rejects(connections.issueFor(a, 'n8.example', slow), /already waits on 8 new certificates/);
  const other = connections.issueFor(b, 'n8.example', slow);
  for (const r of release) r();
  assert.deepEqual(new Set(await Promise.all([...first, ...joined, other])), new Set(['issued']));
  assert.equal(await connections.issueFor(a, 'n9.example', async () => 'issued'), 'issued', 'slots come back once issued');
});

test('gateway connections: cutting a sandbox resets its connections and its new ones until released, no other sandbox', () => {
  const connections = new GatewayConnections((ip) => ({ sandboxId: ip === '10.213.0.2' ? 'sbx_a' : 'sbx_b', sessionId: 'ses' }) as never);
  const resets: string[] = [];
  const socketFrom = (name: string, remoteAddress: string) =>
    Object.assign(new EventEmitter(), {
      remoteAddress,
      setTimeout: () => undefined,
      destroy: () => undefined,
      resetAndDestroy: () => void resets.push(name),
    }) as never;
  assert.ok(connections.accept(socketFrom('a1', '10.213.0.2')));
  assert.ok(connections.accept(socketFrom('b1', '10.213.0.6')));
  const release = connections.cutSandbox('sbx_a');
  assert.deepEqual(resets, ['a1']);
  assert.equal(connections.accept(socketFrom('a2', '10.213.0.2')), false, 'a new connection of the cut sandbox is reset');
  assert.ok(connections.accept(socketFrom('b2', '10.213.0.6')), 'another sandbox connects as ever');
  release();
  assert.ok(connections.accept(socketFrom('a3', '10.213.0.2')), 'taken again once released');
  assert.deepEqual(resets, ['a1', 'a2']);
});
