import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { openSqliteStore } from '../store/open-store.js';
import type { ApiKeyRow } from '../store/store.js';
import { Authenticator, hashKey } from './auth.js';
import { KeyCache } from './key-cache.js';

const key = (hash: string, sessionId: string | null = null, scope: string | null = null): ApiKeyRow => ({
  id: `key_${hash}`,
  tenantId: 'tn_a',
  hash,
  admin: false,
  createdAt: '',
  sessionId,
  scope,
  expiresAt: null,
});

test('the key cache keeps a key for its time, within its bound, and forgets a session’s revoked keys', () => {
  const clock = { now: 0 };
  const cache = new KeyCache({ ttlMs: 5_000, maxEntries: 3, now: () => clock.now });
  cache.set('a', key('a'));
  clock.now = 4_999;
  assert.equal(cache.get('a')?.id, 'key_a');
  clock.now = 5_000;
  assert.equal(cache.get('a'), undefined, 'read again once its time is up');

  for (const hash of ['b', 'c', 'd', 'e']) cache.set(hash, key(hash));
  assert.deepEqual(
    ['b', 'c', 'd', 'e'].map((h) => cache.get(h)?.id ?? null),
    [null, 'key_c', 'key_d', 'key_e'],
    'the oldest went past the bound',
  );

  cache.set('p80', key('p80', 'ses_1', 'port:80'));
  cache.set('p81', key('p81', 'ses_1', 'port:81'));
  cache.forgetSession('ses_1', 'port:80');
  assert.deepEqual([cache.get('p80'), cache.get('p81')?.id], [undefined, 'key_p81'], 'only the revoked scope');
  cache.forgetSession('ses_1');
  assert.equal(cache.get('p81'), undefined);

  const off = new KeyCache({ ttlMs: 0, maxEntries: 3, now: () => clock.now });
  off.set('a', key('a'));
  assert.equal(off.get('a'), undefined, '0 keeps none');
});

test('authentication reads a key from the store once per cache time; a revocation through this control plane holds at once, through another within that time', async () => {
  const clock = { now: Date.parse('2026-12-04T12:00:00.000Z') };
  const store = await openSqliteStore(':memory:');
  let reads = 0;
  const findApiKey = store.findApiKey.bind(store);
  store.findApiKey = (hash) => (reads++, findApiKey(hash));
  const auth = new Authenticator(store, { cacheMs: 5_000, now: () => clock.now });
  const other = new Authenticator(store, { cacheMs: 5_000, now: () => clock.now });
  await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
  const { key: apiKey } = await auth.createKey('tn_a');
  const request = (k: string, url = '/v1/sessions') => ({ method: 'GET', url, headers: { authorization: `Bearer ${k}` } }) as unknown as IncomingMessage;

  for (let i = 0; i < 10; i++) assert.equal((await auth.authenticate(request(apiKey))).tenantId, 'tn_a');
  assert.equal(reads, 1, 'ten requests, one read');
  await assert.rejects(auth.authenticate(request('sk_unknown')), { code: 'UNAUTHORIZED' });
  await assert.rejects(auth.authenticate(request('sk_unknown')), { code: 'UNAUTHORIZED' });
  assert.equal(reads, 3, 'a key not found is read every time (one made elsewhere works at once)');

  // A preview token revoked through one control plane: refused there at once, by the other once its time is up.
  const { token } = await auth.createPreviewToken('tn_a', 'ses_p', 8000, 3600);
  const preview = request(token, '/v1/sessions/ses_p/ports/8000/');
  assert.equal((await auth.authenticate(preview)).sessionId, 'ses_p');
  assert.equal((await other.authenticate(request(token, '/v1/sessions/ses_p/ports/8000/'))).sessionId, 'ses_p');
  assert.equal(await auth.revokePreviewTokens('ses_p', 8000), 1);
  await assert.rejects(auth.authenticate(request(token, '/v1/sessions/ses_p/ports/8000/')), { code: 'UNAUTHORIZED' });
  assert.equal((await other.authenticate(request(token, '/v1/sessions/ses_p/ports/8000/'))).sessionId, 'ses_p', 'within the bound');
  clock.now += 5_000;
  await assert.rejects(other.authenticate(request(token, '/v1/sessions/ses_p/ports/8000/')), { code: 'UNAUTHORIZED' });

  // An expiry is checked on every use, cached or not.
  const short = await auth.createPreviewToken('tn_a', 'ses_p', 8001, 2);
  assert.equal((await auth.authenticate(request(short.token, '/v1/sessions/ses_p/ports/8001/'))).sessionId, 'ses_p');
  clock.now = Date.parse(short.expiresAt);
  await assert.rejects(auth.authenticate(request(short.token, '/v1/sessions/ses_p/ports/8001/')), { code: 'UNAUTHORIZED' });
  assert.equal(hashKey(apiKey).length, 64);
});
