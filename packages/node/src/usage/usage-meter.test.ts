import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { SandboxRecord } from '../sandbox-record.js';
import type { LiveSandbox } from '../sandbox/live-sandboxes.js';
import { UsageLedger } from './usage-ledger.js';
import { UsageMeter } from './usage-meter.js';

const period = (n: number) => ({
  start: new Date(n * 15_000).toISOString(),
  end: new Date((n + 1) * 15_000).toISOString(),
  entries: [],
});

async function tempDir(t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'space-usage-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('the ledger keeps unacknowledged batches across restarts, numbers on from the last, and skips a line a crash cut short', async (t) => {
  const dir = await tempDir(t);
  const ledger = await UsageLedger.open(dir);
  await ledger.append(period(0));
  await ledger.append(period(1));
  await ledger.append(period(2));
  await ledger.acknowledge('led_someoneelse', 3);
  assert.equal(ledger.pendingCount, 3, "another ledger's acknowledgement changes nothing");
  await ledger.acknowledge(ledger.id, 1);
  await appendFile(path.join(dir, 'batches.jsonl'), '{"ledger":"led_');
  const reopened = await UsageLedger.open(dir);
  assert.equal(reopened.id, ledger.id);
  assert.deepEqual(
    reopened.unacknowledged(10).map((b) => b.seq),
    [2, 3],
  );
  assert.deepEqual(
    reopened.unacknowledged(10, 10).map((b) => b.seq),
    [2],
    'the first one at least, however large',
  );
  await reopened.append(period(3));
  await reopened.acknowledge(reopened.id, 4);
  assert.equal(reopened.pendingCount, 0);
  await reopened.append(period(4));
  assert.deepEqual(
    (await UsageLedger.open(dir)).unacknowledged(10).map((b) => b.seq),
    [5],
  );
});

test('the meter counts CPU by difference, integrates memory and time, adds egress, reads a stopping sandbox once more, and bills no pool time', async (t) => {
  const ledger = await UsageLedger.open(await tempDir(t));
  let now = Date.parse('2026-12-05T10:00:00.000Z');
  const cgroups = new Map<string, { cpuNanos: number; memoryBytes: number }>();
  const live: LiveSandbox[] = [];
  const record = (sandboxId: string, sessionId: string, startedAt: number): SandboxRecord => ({
    sandboxId,
    sessionId,
    template: 'tiny',
    startedAt: new Date(startedAt).toISOString(),
    token: 't',
    leaseIndex: 0,
    sandboxIp: '10.0.0.2',
    tenantId: 'tn_a',
  });
  const meter = new UsageMeter({
    live: { all: () => live },
    cgroup: async (id) => cgroups.get(id) ?? null,
    volumeBytes: async () => new Map([['ses_a', 2 ** 30]]),
    ledger,
    sampleMs: 15_000,
    log: { info: () => undefined, warn: () => undefined, error: () => undefined },
    now: () => now,
  });
  // A sandbox started 5 s ago (1 s of CPU so far), and a pooled one.
  const a = record('sbx_a', 'ses_a', now - 5000);
  const pooled = record('sbx_p', 'pool_x', now - 60_000);
  live.push({ record: a } as LiveSandbox, { record: pooled } as LiveSandbox);
  cgroups.set('sbx_a', { cpuNanos: 1e9, memoryBytes: 2 ** 30 });
  cgroups.set('sbx_p', { cpuNanos: 3e9, memoryBytes: 2 ** 28 });
  now += 10_000;
  await meter.sample();
  meter.egress('ses_a', { bytesSent: 10, bytesReceived: 5000 });
  meter.egress('pool_x', { bytesSent: 10, bytesReceived: 5000 });
  // The pooled sandbox is claimed (its CPU so far is the pool's), then both run 10 s more.
  cgroups.set('sbx_p', { cpuNanos: 4e9, memoryBytes: 2 ** 28 });
  pooled.sessionId = 'ses_b';
  await meter.begin(pooled);
  cgroups.set('sbx_a', { cpuNanos: 3e9, memoryBytes: 2 ** 29 });
  cgroups.set('sbx_p', { cpuNanos: 4.5e9, memoryBytes: 2 ** 28 });
  now += 10_000;
  await meter.end(a);
  live.splice(0, 1);
  await meter.sample();

  const entries = ledger.unacknowledged(10).flatMap((b) => b.entries.map((e) => ({ seq: b.seq, ...e })));
  const of = (sessionId: string) => entries.filter((e) => e.sessionId === sessionId);
  const sum = (sessionId: string, key: 'cpuMicros' | 'sandboxMs' | 'memoryKibSeconds' | 'egressBytesIn' | 'egressRequests' | 'diskKibSeconds') =>
    of(sessionId).reduce((total, e) => total + e[key], 0);
  assert.equal(sum('ses_a', 'cpuMicros'), 3_000_000, 'all of its CPU, from its start');
  assert.equal(sum('ses_a', 'sandboxMs'), 25_000, 'from its start (5 s before the first sample) to its stop');
  // 1 GiB over its first 15 s, 0.5 GiB over the last 10 s (as read at each end).
  assert.equal(sum('ses_a', 'memoryKibSeconds'), 2 ** 20 * 15 + 2 ** 19 * 10);
  assert.equal(sum('ses_a', 'egressBytesIn'), 5000);
  assert.equal(sum('ses_a', 'egressRequests'), 1);
  assert.equal(sum('ses_a', 'diskKibSeconds'), 2 ** 20 * 20, 'its volume, 1 GiB, over the 20 s metered');
  assert.equal(of('ses_a')[0]!.tenantId, 'tn_a');
  assert.equal(sum('ses_b', 'cpuMicros'), 500_000, 'only what it used since its claim');
  assert.equal(
    entries.some((e) => e.sessionId.startsWith('pool_')),
    false,
    'the pool is nobody’s',
  );
});
