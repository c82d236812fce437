import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { SecretCipher } from './secret-cipher.js';

test('secret values are sealed with the key file: round trip, a fresh nonce each time, tampering and other keys refused', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-cipher-'));
  try {
    const file = path.join(dir, 'secrets.key');
    const cipher = await SecretCipher.load(file);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal((await SecretCipher.load(file)).open(cipher.seal('same key next start')), 'same key next start');
    const sealed = cipher.seal('sk-live-ünïcode');
    assert.ok(!sealed.includes('sk-live'));
    assert.notEqual(cipher.seal('sk-live-ünïcode'), sealed);
    assert.equal(cipher.open(sealed), 'sk-live-ünïcode');
    const raw = Buffer.from(sealed.slice(3), 'base64');
    raw[raw.length - 1]! ^= 1;
    assert.throws(() => cipher.open(`v1:${raw.toString('base64')}`));
    const other = await SecretCipher.load(path.join(dir, 'other.key'));
    assert.throws(() => other.open(sealed));
    assert.throws(() => cipher.open('plain text'), /not a sealed secret value/);
    writeFileSync(path.join(dir, 'bad.key'), 'short');
    await assert.rejects(SecretCipher.load(path.join(dir, 'bad.key')), /64 hex digits/);
    assert.match(readFileSync(file, 'utf8'), /^[0-9a-f]{64}\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
