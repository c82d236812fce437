import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import type { EgressAuditEntry } from '@space/protocol';
import { AuditLog } from './audit-log.js';

const dir = mkdtempSync(path.join(tmpdir(), 'space-audit-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const entry = (n: number): EgressAuditEntry => ({
  time: new Date().toISOString(),
  sandboxId: 'sbx_test000001',
  scheme: 'https',
  host: `h${n}.example.com`,
  method: 'GET',
  path: '/',
  status: 403,
  decision: 'denied',
  bytesSent: 0,
  bytesReceived: 0,
  durationMs: 1,
  secrets: [],
});

test('a read right after requests were answered sees every one of them, in order (appends are not awaited by the gateway)', async () => {
  const log = new AuditLog(dir);
  for (let n = 0; n < 50; n++) void log.append('ses_audit00001', entry(n));
  const read = await log.read('ses_audit00001', 100);
  assert.deepEqual(
    read.map((e) => e.host),
    Array.from({ length: 50 }, (_, n) => `h${n}.example.com`),
  );
  await log.remove('ses_audit00001');
  assert.deepEqual(await log.read('ses_audit00001', 100), []);
});
