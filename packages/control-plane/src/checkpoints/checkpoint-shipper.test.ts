import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { DataKey, StoredObject } from '@space/protocol';
import type { NodeClient } from '../cluster/node-client.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import { Metrics } from '../metrics/metrics.js';
import type { CheckpointRow } from '../store/store.js';
import { servicesOnFakeNode } from '../test-support/services.js';
import { CheckpointShipper } from './checkpoint-shipper.js';
import type { DataKeys } from './data-keys.js';

const object = (key: string): StoredObject => ({ key, bytes: 1, sha256: '0'.repeat(64) });

/** A node whose shipments take `ms` each and are counted. */
function slowNode(ms: number) {
  const shipped: string[] = [];
  const node = {
    nodeId: 'fake-node',
    createBase: async (id: string) => ({ id, object: object(`bases/${id}.send`), volumes: [] }),
    shipCheckpoint: async (id: string) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      shipped.push(id);
      return [object(`checkpoints/${id}.send`)];
    },
    deleteObjects: async () => undefined,
  } as unknown as NodeClient;
  return { node, shipped };
}

/** Two control planes' shippers on one store (their own claims), and one checkpoint to ship. */
async function twoShippers(shipMs: number, claimMs = 300) {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const row: CheckpointRow = {
    id: 'ckp_claimtest001',
    sessionId: session.id,
    tenantId: s.caller.tenantId,
    kind: 'fs',
    trigger: 'manual',
    nodeId: 'fake-node',
    createdAt: new Date().toISOString(),
    sizeBytes: null,
    pauseMs: null,
    volumes: [],
    shippedAt: null,
    shippedBaseId: null,
    shippedObjects: null,
  };
  await s.store.insertCheckpoint(row);
  const { node, shipped } = slowNode(shipMs);
  const log: string[] = [];
  const shipper = (holder: string) =>
    new CheckpointShipper({
      store: s.store,
      nodes: { client: async () => node, live: async () => [node] } as unknown as NodeDirectory,
      dataKeys: { forTenant: async (): Promise<DataKey> => ({ id: 'dk_claimtest', key: Buffer.alloc(32).toString('base64') }) } as unknown as DataKeys,
      metrics: new Metrics(),
      log: (m) => log.push(m),
      enabled: true,
      holder,
      claimMs,
    });
  return { s, row, shipped, log, a: shipper('cp-a/1'), b: shipper('cp-b/1') };
}

test('one control plane ships a checkpoint at a time: another leaves it to the claim holder, or waits for it when it needs it shipped', async () => {
  const t = await twoShippers(400);
  const first = t.a.ship(t.row);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(await t.b.ship(t.row), false, 'left to the control plane that claimed it');
  assert.equal(await t.b.ship(t.row, { awaitOthers: true }), false, 'waited for, shipped by the other');
  assert.equal(await first, true);
  assert.deepEqual(t.shipped, [t.row.id], 'shipped once');
  assert.ok((await t.s.store.getCheckpoint(t.row.tenantId, t.row.id))?.shippedAt);
  assert.deepEqual(await t.s.store.listAbandonedShipments(Date.now() + 60_000), [], 'its claim went with the shipment');
});

test("a shipment whose control plane died is taken over once its claim expires, at the next pass, not at the minute's retry", async () => {
  const t = await twoShippers(10);
  // Control plane A claimed it and died: its claim is not renewed.
  assert.equal(await t.s.store.claimShipment(t.row.id, 'cp-a/dead', Date.now() + 300, Date.now()), true);
  assert.equal(await t.b.takeOverAbandoned(), 0, 'not while the claim lasts');
  assert.equal(await t.b.ship(t.row), false);
  await new Promise((resolve) => setTimeout(resolve, 350));
  assert.equal(await t.b.takeOverAbandoned(), 1);
  for (let i = 0; i < 100 && !(await t.s.store.getCheckpoint(t.row.tenantId, t.row.id))?.shippedAt; i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(t.shipped, [t.row.id]);
  // The dead one's late answer records nothing: its claim is gone.
  assert.equal(await t.s.store.markShipped(t.row.id, 'cp-a/dead', { at: new Date().toISOString(), baseId: 'bse_x', objects: [] }), false);
});

test('a claim held while the shipment runs is renewed: a shipment longer than the claim is not taken over', async () => {
  const t = await twoShippers(700, 300);
  const first = t.a.ship(t.row);
  await new Promise((resolve) => setTimeout(resolve, 450));
  assert.equal(await t.b.takeOverAbandoned(), 0, 'renewed every third of the claim');
  assert.equal(await first, true);
  assert.deepEqual(t.shipped, [t.row.id]);
});

test('unused bases are collected with each live node asked once per 500 of them: their objects deleted, their rows gone', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const base = (id: string, sessionId: string, createdAt = '2026-01-01T00:00:00.000Z') => ({
    id,
    sessionId,
    object: object(`bases/${id}.send`),
    volumeObjects: [],
    createdAt,
  });
  // 502 bases of a deleted session, an older base of a live session (replaced), and that session's newest (kept).
  const gone = Array.from({ length: 502 }, (_, i) => `bse_gone${String(i).padStart(4, '0')}`);
  for (const id of gone) await s.store.insertShipBase(base(id, 'ses_deleted0001'));
  await s.store.insertShipBase(base('bse_older00001', session.id, '2026-01-01T00:00:00.000Z'));
  await s.store.insertShipBase(base('bse_newest0001', session.id, '2026-01-02T00:00:00.000Z'));
  const asked: string[][] = [];
  const deletedObjects: string[] = [];
  const node = (nodeId: string) =>
    ({
      nodeId,
      deleteBases: async (ids: string[]) => void asked.push([nodeId, ...ids]),
      deleteObjects: async (keys: string[]) => void deletedObjects.push(...keys),
    }) as unknown as NodeClient;
  const nodes = [node('node-a'), node('node-b'), node('node-c')];
  const shipper = new CheckpointShipper({
    store: s.store,
    nodes: { live: async () => nodes } as unknown as NodeDirectory,
    dataKeys: {} as DataKeys,
    metrics: new Metrics(),
    log: () => undefined,
    enabled: true,
    holder: 'cp-a/1',
  });
  const notOurs = new Set(['bse_gone0007']);
  assert.equal(await shipper.collectBases((id) => !notOurs.has(id)), 502);
  assert.deepEqual(
    asked.map(([nodeId, ...ids]) => `${nodeId} ${ids.length}`),
    ['node-a 500', 'node-b 500', 'node-c 500', 'node-a 2', 'node-b 2', 'node-c 2'],
    'one call per node for each 500',
  );
  assert.ok(!asked.flat().includes('bse_gone0007'), "another control plane's share is left to it");
  assert.equal(deletedObjects.length, 502);
  assert.deepEqual(
    (await s.store.unusedShipBases()).map((b) => b.id),
    ['bse_gone0007'],
  );
  assert.ok(await s.store.getShipBase('bse_newest0001'), "a live session's newest base stays");
});
