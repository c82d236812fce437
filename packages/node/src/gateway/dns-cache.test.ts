import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { test } from 'node:test';
import { DnsCache, type DnsCacheOptions } from './dns-cache.js';
import { answerQuery } from './dns-responder.js';

/** The question's name in a DNS query (labels from offset 12). */
function questionName(query: Buffer): string {
  const labels: string[] = [];
  for (let offset = 12; query[offset]! > 0; offset += 1 + query[offset]!) labels.push(query.subarray(offset + 1, offset + 1 + query[offset]!).toString());
  return labels.join('.');
}

/**
 * A DNS server on loopback that answers A queries from `zone` with each name's TTL, answers
 * NXDOMAIN for names it does not know, and never answers names in `stalled`. It counts the queries
 * it gets, by name.
 */
async function dnsServer(zone: Record<string, { address: string; ttl: number }>, stalled = new Set<string>(), tryTimeoutMs = 200) {
  const queries = new Map<string, number>();
  const socket: Socket = createSocket('udp4');
  socket.on('message', (message, remote) => {
    const name = questionName(message);
    queries.set(name, (queries.get(name) ?? 0) + 1);
    if (stalled.has(name)) return;
    const record = zone[name];
    let reply = answerQuery(message, record?.address ?? '0.0.0.0', record?.ttl ?? 0);
    if (!reply) return;
    if (!record) {
      reply = reply.subarray(0, reply.length - (reply.readUInt16BE(6) ? 16 : 0));
      reply.writeUInt16BE(reply.readUInt16BE(2) | 3, 2); // NXDOMAIN
      reply.writeUInt16BE(0, 6);
    }
    socket.send(reply, remote.port, remote.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const resolver = new Resolver({ timeout: tryTimeoutMs, tries: 1 });
  resolver.setServers([`127.0.0.1:${socket.address().port}`]);
  return { resolver, queries, close: () => new Promise<void>((resolve) => socket.close(() => resolve())) };
}

function cacheOn(resolver: Resolver, options: Partial<DnsCacheOptions> = {}) {
  const fallbackAsked: string[] = [];
  const cache = new DnsCache({
    resolver,
    fallback: async (host) => {
      fallbackAsked.push(host);
      if (host === 'hosts-file.test') return ['203.0.113.77'];
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    },
    ipv6: false,
    maxTtlSeconds: 300,
    timeoutMs: 1000,
    ...options,
  });
  return { cache, fallbackAsked };
}

test('dns cache: a burst to one name costs one query, answers are kept for their TTL and asked again after it', async (t) => {
  const server = await dnsServer({ 'a.test': { address: '203.0.113.1', ttl: 30 }, 'short.test': { address: '203.0.113.2', ttl: 1 } });
  t.after(server.close);
  let now = 1_000_000;
  const { cache } = cacheOn(server.resolver, { now: () => now });
  const burst = await Promise.all(Array.from({ length: 50 }, () => cache.lookUp('a.test')));
  assert.ok(burst.every((a) => a.join() === '203.0.113.1'));
  assert.equal(server.queries.get('a.test'), 1);
  assert.deepEqual(await cache.lookUp('A.TEST'), ['203.0.113.1'], 'names are case-insensitive');
  assert.equal(server.queries.get('a.test'), 1);
  await cache.lookUp('short.test');
  now += 1500; // past short.test's TTL of 1 s, within a.test's 30 s
  await cache.lookUp('short.test');
  await cache.lookUp('a.test');
  assert.equal(server.queries.get('short.test'), 2);
  assert.equal(server.queries.get('a.test'), 1);
});

test('dns cache: the TTL is capped, and a cap of 0 keeps nothing', async (t) => {
  const server = await dnsServer({ 'long.test': { address: '203.0.113.3', ttl: 86_400 } });
  t.after(server.close);
  let now = 1_000_000;
  const capped = cacheOn(server.resolver, { maxTtlSeconds: 60, now: () => now }).cache;
  await capped.lookUp('long.test');
  now += 59_000;
  await capped.lookUp('long.test');
  assert.equal(server.queries.get('long.test'), 1);
  now += 2_000;
  await capped.lookUp('long.test');
  assert.equal(server.queries.get('long.test'), 2);
  const uncached = cacheOn(server.resolver, { maxTtlSeconds: 0 }).cache;
  await uncached.lookUp('long.test');
  await uncached.lookUp('long.test');
  assert.equal(server.queries.get('long.test'), 4);
  assert.equal(uncached.size, 0);
});

test('dns cache: a stalled lookup fails within the bound, or serves the last answer known', async (t) => {
  const stalled = new Set<string>();
  // The resolver would wait 5 s (the host's default): the cache's own bound is what answers.
  const server = await dnsServer({ 'flaky.test': { address: '203.0.113.4', ttl: 1 } }, stalled, 5000);
  t.after(server.close);
  let now = 1_000_000;
  const { cache } = cacheOn(server.resolver, { timeoutMs: 300, now: () => now });
  stalled.add('never.test');
  const started = performance.now();
  await assert.rejects(cache.lookUp('never.test'), { code: 'ETIMEOUT' });
  const waited = performance.now() - started;
  assert.ok(waited < 600, `a stalled lookup waited ${waited.toFixed(0)} ms (bound 300 ms)`);
  assert.deepEqual(await cache.lookUp('flaky.test'), ['203.0.113.4']);
  stalled.add('flaky.test');
  now += 5_000; // stale now, and its server stalls: the stale answer is used
  assert.deepEqual(await cache.lookUp('flaky.test'), ['203.0.113.4']);
  now += 700_000; // past the serve-stale window: it fails
  await assert.rejects(cache.lookUp('flaky.test'));
});

test("dns cache: a name DNS does not know goes to the host's resolver; one that nobody knows is remembered briefly", async (t) => {
  const server = await dnsServer({});
  t.after(server.close);
  let now = 1_000_000;
  const { cache, fallbackAsked } = cacheOn(server.resolver, { now: () => now });
  assert.deepEqual(await cache.lookUp('hosts-file.test'), ['203.0.113.77']);
  await assert.rejects(cache.lookUp('nowhere.test'), { code: 'ENOTFOUND' });
  await assert.rejects(cache.lookUp('nowhere.test'), { code: 'ENOTFOUND' });
  assert.equal(server.queries.get('nowhere.test'), 1, 'a name that does not exist is not asked again at once');
  assert.deepEqual(fallbackAsked, ['hosts-file.test', 'nowhere.test']);
  now += 6_000;
  await assert.rejects(cache.lookUp('nowhere.test'), { code: 'ENOTFOUND' });
  assert.equal(server.queries.get('nowhere.test'), 2);
});

test('dns cache: bounded, the least recently used name goes first', async (t) => {
  const zone = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`n${i}.test`, { address: `203.0.113.${10 + i}`, ttl: 300 }]));
  const server = await dnsServer(zone);
  t.after(server.close);
  const { cache } = cacheOn(server.resolver, { maxEntries: 3 });
  for (const name of ['n0.test', 'n1.test', 'n2.test']) await cache.lookUp(name);
  await cache.lookUp('n0.test'); // n1 is now the least recently used
  await cache.lookUp('n3.test');
  assert.equal(cache.size, 3);
  await cache.lookUp('n0.test');
  await cache.lookUp('n1.test');
  assert.equal(server.queries.get('n0.test'), 1);
  assert.equal(server.queries.get('n1.test'), 2);
});
