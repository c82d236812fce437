import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NodeHeartbeat, NodeUsageBatch } from '@space/protocol';
import { session } from '../test-support/store-rows.js';
import { servicesOnFakeNode } from '../test-support/services.js';

const usageBatch = (seq: number, sessionId: string): NodeUsageBatch => ({
  ledger: 'led_0000beat',
  seq,
  start: '2026-12-07T10:00:00.000Z',
  end: '2026-12-07T10:00:15.000Z',
  entries: [
    {
      sessionId,
      tenantId: 'tn_test0001',
      cpuMicros: 3_000_000,
      memoryKibSeconds: 0,
      diskKibSeconds: 0,
      egressBytesOut: 0,
      egressBytesIn: 0,
      egressRequests: 0,
      sandboxMs: 15_000,
    },
  ],
});

async function onFakeNode() {
  const s = await servicesOnFakeNode();
  const beat = (fields: Partial<NodeHeartbeat> = {}): NodeHeartbeat => ({
    id: s.node.nodeId,
    url: 'https://fake-node.invalid',
    token: 'fake-node-token-0',
    capacity: { memoryMb: 4096, cpus: 2 },
    sandboxes: s.node.sandboxes.size,
    ...fields,
  });
  return { ...s, beat };
}

test('a heartbeat naming sessions whose egress settings its node lost: those running there get theirs again, no other session’s', async () => {
  const s = await onFakeNode();
  const own = await s.create({ egress: { mode: 'deny-all' } });
  // Another node's session: its settings must never be sent on this node's word (the fake node answers for every node id).
  await s.nodes.heartbeat({ ...s.beat(), id: 'node_other', url: 'https://other-node.invalid' });
  await s.store.insertSession({ ...session('ses_elsewhere1', 'tn_test0001'), nodeId: 'node_other', volumeNodeId: 'node_other' });
  s.node.egress.clear();
  await s.heartbeats.receive(s.beat({ egressUnconfigured: [own.id, 'ses_elsewhere1', 'ses_unknown01'] }));
  await s.heartbeats.settle();
  assert.deepEqual([...s.node.egress.keys()], [own.id]);
  assert.equal(s.node.egress.get(own.id)?.policy.mode, 'deny-all');
});

test('a heartbeat saying its node holds usage batches: they are collected once, stored, acknowledged; a pass does not ask for them', async () => {
  const s = await onFakeNode();
  const { id } = await s.create();
  s.node.usage = [usageBatch(1, id), usageBatch(2, id)];
  await s.maintenance.tick();
  assert.equal(s.node.usageAsked, 0, 'the pass leaves usage to the heartbeats');

  let release = () => {};
  s.node.usageHeld = new Promise<void>((resolve) => (release = resolve));
  await s.heartbeats.receive(s.beat({ usageBatches: 2 }));
  await s.heartbeats.receive(s.beat({ usageBatches: 2 }));
  assert.equal(s.node.usageAsked, 1, 'one collection per node at a time: the second beat found it under way');
  release();
  await s.heartbeats.settle();
  assert.deepEqual(s.node.usage, [], 'acknowledged: the node forgets them');
  const metered = async () =>
    (await s.usageReports.report(s.caller, { from: '2026-12-07T00:00:00.000Z', to: '2026-12-08T00:00:00.000Z', groupBy: 'tenant' })).totals.cpuSeconds;
  assert.equal(await metered(), 6);

  // A beat with none to collect asks nothing; one after a failed acknowledgement collects again, counting nothing twice.
  s.node.usageHeld = null;
  await s.heartbeats.receive(s.beat());
  await s.heartbeats.settle();
  assert.equal(s.node.usageAsked, 1);
  s.node.usage = [usageBatch(3, id)];
  s.node.failNextAck = true;
  await s.heartbeats.receive(s.beat({ usageBatches: 1 }));
  await s.heartbeats.settle();
  assert.equal(s.node.usage.length, 1, 'kept by the node: not acknowledged');
  await s.heartbeats.receive(s.beat({ usageBatches: 1 }));
  await s.heartbeats.settle();
  assert.deepEqual([s.node.usage, await metered()], [[], 9]);
  assert.match(s.log.join('\n'), /usage of node node_fake not collected/);
});
