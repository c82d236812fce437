import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { makeTestCertificates } from '@space/server-kit';
import { startLocalPostgres } from './local-postgres.js';
import { openPostgresStore } from './open-store.js';

test('a local PostgreSQL whose directory another server still holds is refused with what to do; once that one stops, it starts', async () => {
  const parent = mkdtempSync(path.join(tmpdir(), 'space-pg-test-'));
  chmodSync(parent, 0o755); // the server runs as postgres, which must enter it
  const dir = path.join(parent, 'postgres');
  const first = await startLocalPostgres({ dir });
  try {
    await assert.rejects(
      startLocalPostgres({ dir, previousServerWaitMs: 600 }),
      /still runs \(pid \d+\) after 0\.6 s: another "space cluster up" uses this directory/,
    );
  } finally {
    await first.stop();
  }
  const again = await startLocalPostgres({ dir, previousServerWaitMs: 600 });
  try {
    assert.match(await again.url('space'), /^postgres:\/\/postgres@127\.0\.0\.1:\d+\/space$/);
  } finally {
    await again.stop();
    rmSync(parent, { recursive: true, force: true });
  }
});

test('a PostgreSQL that takes TLS connections only: the store connects with sslmode=verify-full against its CA; another CA, another name, or no TLS are refused', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-pg-tls-'));
  const certificates = makeTestCertificates(path.join(dir, 'tls'), ['127.0.0.1'], 'SPACE test database CA');
  const otherCa = makeTestCertificates(path.join(dir, 'other'), ['127.0.0.1'], 'another CA').caFile;
  const server = await startLocalPostgres({ tls: certificates });
  try {
    const url = await server.url('space');
    assert.match(url, /\?sslmode=verify-full&sslrootcert=/);
    const store = await openPostgresStore(url);
    try {
      await store.insertTenant({ id: 'tn_tls', name: 'over TLS', createdAt: '2026-12-03T00:00:00Z' });
      assert.equal((await store.getTenant('tn_tls'))?.name, 'over TLS');
    } finally {
      await store.close();
    }
    const refused = (changed: string) =>
      openPostgresStore(changed).then(
        (s) => s.close().then(() => 'connected'),
        (err: Error) => err.message,
      );
    assert.match(await refused(url.replace(encodeURIComponent(certificates.caFile), encodeURIComponent(otherCa))), /SPACE_DATABASE_URL.*certificate/);
    assert.match(await refused(url.replace(/\?.*$/, '?sslmode=disable')), /SPACE_DATABASE_URL.*(no encryption|pg_hba\.conf)/);
    // verify-full checks the server's name too: its certificate names 127.0.0.1, not localhost.
    assert.match(await refused(url.replace('@127.0.0.1:', '@localhost:')), /SPACE_DATABASE_URL.*(altnames|does not match)/);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
