import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { openSqliteStore } from '../store/open-store.js';
import { SecretCipher } from '../store/secret-cipher.js';
import { DataKeys, secretsKeyWrap } from './data-keys.js';

const cipher = () => new SecretCipher(randomBytes(32));

test("a tenant's data key is made once, stored wrapped, and the same for every control plane sharing the secrets key", async () => {
  const store = await openSqliteStore(':memory:');
  const secrets = cipher();
  // Two control planes (two DataKeys on one store) asking at once.
  const [a, b] = await Promise.all([
    new DataKeys({ store, wrap: secretsKeyWrap(secrets) }).forTenant('tn_a'),
    new DataKeys({ store, wrap: secretsKeyWrap(secrets) }).forTenant('tn_a'),
  ]);
  assert.deepEqual(a, b);
  assert.match(a.id, /^dk_[a-z0-9]{12}$/);
  assert.equal(Buffer.from(a.key, 'base64').length, 32);
  const row = await store.tenantDataKey('tn_a');
  assert.equal(row?.id, a.id);
  assert.equal(row!.wrapped.includes(a.key), false, 'the store holds it wrapped only');
  assert.deepEqual(await new DataKeys({ store, wrap: secretsKeyWrap(secrets) }).forTenant('tn_a'), a, 'a restart finds it');
  const other = await new DataKeys({ store, wrap: secretsKeyWrap(secrets) }).forTenant('tn_b');
  assert.notEqual(other.id, a.id);
  assert.notEqual(other.key, a.key, 'one key per tenant');
});

test('a control plane with another secrets key cannot unwrap it, and says which setting they must share', async () => {
  const store = await openSqliteStore(':memory:');
  await new DataKeys({ store, wrap: secretsKeyWrap(cipher()) }).forTenant('tn_a');
  await assert.rejects(new DataKeys({ store, wrap: secretsKeyWrap(cipher()) }).forTenant('tn_a'), /cannot be unwrapped .*SPACE_SECRETS_KEY_FILE/);
});

test('a KMS-style wrap stands in for the secrets key', async () => {
  const store = await openSqliteStore(':memory:');
  const calls: string[] = [];
  const kms = {
    wrap: async (key: Buffer) => (calls.push('wrap'), `kms:${Buffer.from(key).reverse().toString('hex')}`),
    unwrap: async (wrapped: string) => (calls.push('unwrap'), Buffer.from(wrapped.slice(4), 'hex').reverse()),
  };
  const keys = new DataKeys({ store, wrap: kms });
  const key = await keys.forTenant('tn_a');
  await keys.forTenant('tn_a');
  assert.deepEqual(calls, ['wrap', 'unwrap'], 'unwrapped once, then kept');
  assert.match((await store.tenantDataKey('tn_a'))!.wrapped, /^kms:/);
  assert.equal(Buffer.from(key.key, 'base64').length, 32);
});
