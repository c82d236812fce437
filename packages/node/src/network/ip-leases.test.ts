import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { IpLeases } from './ip-leases.js';

test('leases are unique /30 subnets, released explicitly or when stale', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-leases-'));
  try {
    const a = new IpLeases(dir);
    const b = new IpLeases(dir); // a second instance on the same host shares the directory
    const leases = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? a : b).acquire(`/data/${i % 2} space-sbx_${i}`)));
    assert.equal(new Set(leases.map((l) => l.index)).size, 50);
    for (const l of leases) {
      assert.match(l.hostIp, /^10\.213\.\d+\.\d+$/);
      assert.equal(Number(l.sandboxIp.split('.')[3]), Number(l.hostIp.split('.')[3]) + 1);
    }
    assert.equal(await a.releaseWhere((owner) => owner.startsWith('/data/1 ')), 25);
    await a.release(leases[0]!.index);
    assert.deepEqual(IpLeases.describe(0), { index: 0, hostIp: '10.213.0.1', sandboxIp: '10.213.0.2', prefix: 30 });
    assert.deepEqual(IpLeases.describe(16383), { index: 16383, hostIp: '10.213.255.253', sandboxIp: '10.213.255.254', prefix: 30 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
