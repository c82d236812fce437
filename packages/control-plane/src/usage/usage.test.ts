import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NodeUsageBatch, NodeUsageEntry } from '@space/protocol';
import type { NodeClient } from '../cluster/node-client.js';
import type { Store } from '../store/store.js';
import { hourShares } from '../store/usage-records.js';
import { FakeNode } from '../test-support/fake-node.js';
import { storeEngines } from '../test-support/store-engines.js';
import { checkpoint, session } from '../test-support/store-rows.js';
import { UsageCollector } from './usage-collector.js';
import { UsageReports } from './usage-reports.js';

const engines = storeEngines();

const entry = (sessionId: string, tenantId: string | null, amounts: Partial<NodeUsageEntry> = {}): NodeUsageEntry => ({
  sessionId,
  tenantId,
  cpuMicros: 2_000_000,
  memoryKibSeconds: 2 ** 20 * 10,
  diskKibSeconds: 2 ** 20 * 3600,
  egressBytesOut: 100,
  egressBytesIn: 1000,
  egressRequests: 2,
  sandboxMs: 15_000,
  ...amounts,
});

const batch = (seq: number, entries: NodeUsageEntry[], start = '2026-12-05T10:00:00.000Z', end = '2026-12-05T10:00:15.000Z'): NodeUsageBatch => ({
  ledger: 'led_0000aaaa',
  seq,
  start,
  end,
  entries,
});

/** One batch of node_1 stored: whether it was new. */
const applyOne = async (store: Pick<Store, 'applyUsageBatches'>, b: NodeUsageBatch) => (await store.applyUsageBatches([{ nodeId: 'node_1', batch: b }]))[0];

const admin = { tenantId: 'tn_admin000', admin: true };
const period = { from: '2026-12-05T00:00:00.000Z', to: '2026-12-06T00:00:00.000Z' };

test('a period divides among the UTC hours it touches, by time', () => {
  assert.deepEqual(hourShares(Date.parse('2026-12-05T10:59:00Z'), Date.parse('2026-12-05T11:02:00Z')), [
    ['2026-12-05T10', 1 / 3],
    ['2026-12-05T11', 2 / 3],
  ]);
  assert.deepEqual(hourShares(Date.parse('2026-12-05T10:10:00Z'), Date.parse('2026-12-05T10:10:00Z')), [['2026-12-05T10', 1]]);
});

for (const engine of engines.all) {
  const named = (title: string) => `${engine.name}: ${title}`;

  test(
    named('a batch is counted once however often it is sent; entries without a tenant take their session’s; reports group by tenant, session and day'),
    async () => {
      const store = await engine.open('usage');
      await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
      await store.insertTenant({ id: 'tn_b', name: 'b', createdAt: '' });
      await store.insertSession(session('ses_a1', 'tn_a'));
      assert.equal(await applyOne(store, batch(1, [entry('ses_a1', 'tn_a'), entry('ses_b1', 'tn_b')])), true);
      assert.equal(await applyOne(store, batch(1, [entry('ses_a1', 'tn_a'), entry('ses_b1', 'tn_b')])), false, 'the same (ledger, seq) again');
      // A stopped session's volume: the node cannot name its tenant; a session that is gone is dropped.
      await applyOne(store, batch(2, [entry('ses_a1', null, { cpuMicros: 0 }), entry('ses_gone', null)]));
      // Across midnight: split between the days by time.
      await applyOne(
        store,
        batch(
          3,
          [entry('ses_a1', 'tn_a', { cpuMicros: 4_000_000, memoryKibSeconds: 0, diskKibSeconds: 0 })],
          '2026-12-05T23:59:00.000Z',
          '2026-12-06T00:01:00.000Z',
        ),
      );

      const reports = new UsageReports(store, () => Date.parse('2026-12-06T12:00:00Z'));
      const a = await reports.report({ tenantId: 'tn_a', admin: false }, { ...period, groupBy: 'session' });
      assert.deepEqual(
        a.rows.map((r) => [r.sessionId, r.cpuSeconds, r.memoryGbSeconds, r.diskGbHours, r.egressBytesIn, r.egressRequests, r.sandboxSeconds]),
        [['ses_a1', 2 + 2, 20, 2, 2500, 5, 37.5]],
        'tenant a sees its session only: two batches of 2 s CPU and half of the 4 s across midnight (and of its egress and time)',
      );
      const byDay = await reports.report(admin, { from: period.from, to: '2026-12-07T00:00:00.000Z', groupBy: 'day', tenant: 'tn_a' });
      assert.deepEqual(
        byDay.rows.map((r) => [r.day, r.cpuSeconds]),
        [
          ['2026-12-05', 4],
          ['2026-12-06', 2],
        ],
      );
      const all = await reports.report(admin, { ...period, groupBy: 'tenant' });
      assert.deepEqual(
        all.rows.map((r) => [r.tenantId, r.cpuSeconds]),
        [
          ['tn_a', 4],
          ['tn_b', 2],
        ],
      );
      assert.equal(all.totals.cpuSeconds, 6);
      assert.deepEqual(
        [...(await reports.totals())].map(([tenant, figures]) => [tenant, figures.cpuSeconds]).sort(),
        [
          ['tn_a', 6],
          ['tn_b', 2],
        ],
        'totals since metering began, for /metrics',
      );
      await assert.rejects(reports.report({ tenantId: 'tn_a', admin: false }, { ...period, groupBy: 'day', tenant: 'tn_b' }), /admin key/);
      await assert.rejects(reports.report(admin, { from: period.to, to: period.from, groupBy: 'day' }), /period is empty/);
      const own = await reports.report({ tenantId: 'tn_a', admin: false, sessionId: 'ses_a1' }, { ...period, groupBy: 'session' });
      assert.deepEqual(
        own.rows.map((r) => r.sessionId),
        ['ses_a1'],
        'a session token sees its session',
      );
    },
  );

  test(
    named('checkpoints are counted as they are recorded; their storage and their objects are integrated by one control plane at a time, without gaps'),
    async () => {
      const store = await engine.open('usage_storage');
      const other = await engine.open('usage_storage');
      await store.insertTenant({ id: 'tn_c', name: 'c', createdAt: '' });
      await store.insertSession(session('ses_c1', 'tn_c'));
      await store.insertCheckpoint({ ...checkpoint('ckp_c1', 'ses_c1', 'tn_c', 2 ** 30), createdAt: '2026-12-05T10:30:00.000Z' });
      await store.insertCheckpoint({ ...checkpoint('ckp_c2', 'ses_c1', 'tn_c'), createdAt: '2026-12-05T10:31:00.000Z' });
      // Shipped: 2 GiB in the object store.
      assert.equal(await store.claimShipment('ckp_c1', 'cp-a', Date.now() + 60_000, Date.now()), true);
      const object = { key: 'checkpoints/ckp_c1.send', bytes: 2 ** 31, sha256: 'a'.repeat(64) };
      assert.equal(await store.markShipped('ckp_c1', 'cp-a', { at: new Date().toISOString(), baseId: 'base_c1', objects: [object] }), true);
      const start = Date.now() + 60_000;
      // The clock starts at the migration: the first integration covers the time since, the same `now` again nothing.
      // (SQLite serves one control plane: two connections of one process would wait for each other's lock.)
      const both = [() => store.integrateCheckpointStorage(start, 60_000), () => other.integrateCheckpointStorage(start, 60_000)];
      const first = engine.name === 'postgres' ? await Promise.all(both.map((f) => f())) : [await both[0]!(), await both[1]!()];
      assert.deepEqual(first.filter(Boolean).length, 1, 'one of two control planes integrates');
      assert.equal(await store.integrateCheckpointStorage(start + 30_000, 60_000), false, 'not due yet');
      assert.equal(await other.integrateCheckpointStorage(start + 3_600_000, 60_000), true);
      const reports = new UsageReports(store, () => start + 3_600_000);
      const report = await reports.report({ tenantId: 'tn_c', admin: false }, { from: '2026-12-05T00:00:00.000Z', groupBy: 'session' });
      const storage = report.rows.find((r) => r.sessionId === null);
      assert.ok(storage, 'the tenant’s checkpoint storage has a row of its own');
      // 1 GiB held for an hour since the first integration (and whatever time before it since the migration).
      assert.ok(storage.checkpointGbHours >= 1 && storage.checkpointGbHours < 1.1, `${storage.checkpointGbHours} GiB-hours`);
      assert.ok(storage.objectStoreGbHours >= 2 && storage.objectStoreGbHours < 2.2, `${storage.objectStoreGbHours} GiB-hours in the object store`);
      // Deleted, the checkpoint's bytes are held no more.
      const before = (await reports.totals()).get('tn_c');
      await store.deleteCheckpoint('ckp_c1');
      assert.equal(await other.integrateCheckpointStorage(start + 2 * 3_600_000, 60_000), true);
      assert.deepEqual((await reports.totals()).get('tn_c'), before, 'nothing held after the delete');
      const c1 = await reports.report(
        { tenantId: 'tn_c', admin: false },
        { from: '2026-12-05T10:00:00.000Z', to: '2026-12-05T11:00:00.000Z', groupBy: 'session' },
      );
      assert.deepEqual(
        c1.rows.map((r) => [r.sessionId, r.checkpoints]),
        [['ses_c1', 2]],
      );
    },
  );

  test(
    named(
      'batches of several nodes stored in one transaction: each once, a batch given twice or stored before adds nothing, two control planes storing overlapping ones count each once',
    ),
    async () => {
      const store = await engine.open('usage_together');
      const other = await engine.open('usage_together');
      await store.insertTenant({ id: 'tn_t', name: 't', createdAt: '' });
      const of = (ledger: string, seq: number) => ({ ...batch(seq, [entry('ses_t1', 'tn_t')]), ledger });
      assert.deepEqual(await store.applyUsageBatches([{ nodeId: 'node_1', batch: of('led_0000aaaa', 1) }]), [true]);
      // Two batches of the same session and hour in one statement, one stored before, one given twice.
      const items = [
        { nodeId: 'node_1', batch: of('led_0000aaaa', 1) },
        { nodeId: 'node_1', batch: of('led_0000aaaa', 2) },
        { nodeId: 'node_1', batch: of('led_0000aaaa', 3) },
        { nodeId: 'node_2', batch: of('led_0000bbbb', 1) },
        { nodeId: 'node_2', batch: of('led_0000bbbb', 1) },
      ];
      assert.deepEqual(await store.applyUsageBatches(items), [false, true, true, true, false]);
      const cpu = async () =>
        (await new UsageReports(store, Date.now).report({ tenantId: 'tn_t', admin: false }, { ...period, groupBy: 'tenant' })).totals.cpuSeconds;
      assert.equal(await cpu(), 4 * 2, 'four batches of 2 s');
      // Two control planes, the same new batches in opposite orders at once (PostgreSQL: no deadlock; SQLite serves one control plane).
      const next = [3, 4, 5, 6].map((seq) => ({ nodeId: 'node_2', batch: of('led_0000bbbb', seq) }));
      const results =
        engine.name === 'postgres'
          ? await Promise.all([store.applyUsageBatches(next), other.applyUsageBatches([...next].reverse())])
          : [await store.applyUsageBatches(next), await other.applyUsageBatches([...next].reverse())];
      assert.equal(results.flat().filter(Boolean).length, 4, 'each new batch new to one of them');
      assert.equal(await cpu(), 8 * 2);
    },
  );

  test(named('a control plane that dies after storing a batch and before the node hears so: the next collection counts nothing twice'), async () => {
    const store = await engine.open('usage_collect');
    await store.insertTenant({ id: 'tn_d', name: 'd', createdAt: '' });
    const node = new FakeNode();
    node.usage = [batch(1, [entry('ses_d1', 'tn_d')]), batch(2, [entry('ses_d1', 'tn_d')])];
    const logged: string[] = [];
    const collector = new UsageCollector({ store, log: (m) => logged.push(m), now: Date.now, writeWindowMs: 0 });
    node.failNextAck = true;
    await collector.collectFrom(node as unknown as NodeClient);
    assert.equal(node.usage.length, 2, 'the node keeps what it did not hear acknowledged');
    assert.match(logged.join('\n'), /not collected/);
    node.usage.push(batch(3, [entry('ses_d1', 'tn_d')]));
    await collector.collectFrom(node as unknown as NodeClient);
    assert.equal(node.usage.length, 0);
    const report = await new UsageReports(store, Date.now).report({ tenantId: 'tn_d', admin: false }, { ...period, groupBy: 'tenant' });
    assert.equal(report.totals.cpuSeconds, 6, 'three batches of 2 s, each once');
  });
}
