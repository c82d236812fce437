import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { startLocalPostgres } from './local-postgres.js';

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
