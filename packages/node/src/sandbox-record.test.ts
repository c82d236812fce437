import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { type SandboxRecord, SandboxRecords } from './sandbox-record.js';

const pooled: SandboxRecord = {
  sandboxId: 'sbx_pooled000001',
  sessionId: 'ses_pool00000001',
  template: 'tiny',
  startedAt: '2026-12-06T12:00:00.000Z',
  token: 'token',
  leaseIndex: 3,
  sandboxIp: '10.0.0.3',
};

test("a claim's rewrite of a record replaces the file whole; a write cut short by a crash leaves the old record", async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'space-records-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const records = new SandboxRecords(dir);
  const file = path.join(records.workDir(pooled.sandboxId), 'record.json');

  await records.save(pooled);
  const before = await stat(file);
  const claimed = { ...pooled, sessionId: 'ses_claimed00001', tenantId: 'ten_1' };
  await records.rewrite(claimed);
  // A new file renamed over the old one, not the old one truncated and written again in place.
  assert.notEqual((await stat(file)).ino, before.ino);
  assert.deepEqual(await records.loadAll(), { records: [claimed], orphanDirs: [] });

  // A node agent killed while writing the next one leaves its temporary file, half written: ignored.
  await writeFile(`${file}.tmp`, '{"sandboxId": "sbx_poo');
  assert.deepEqual(await records.loadAll(), { records: [claimed], orphanDirs: [] });
  // And the next rewrite goes through it.
  await records.rewrite(pooled);
  assert.deepEqual(await records.loadAll(), { records: [pooled], orphanDirs: [] });
});
