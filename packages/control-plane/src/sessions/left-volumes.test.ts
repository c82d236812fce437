import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, SpaceError, type EgressAuditEntry } from '@space/protocol';
import type { NodeClient } from '../cluster/node-client.js';
import type { CheckpointRow, SessionRow } from '../store/store.js';
import { servicesOnFakeNode } from '../test-support/services.js';
import { LeftVolumes } from './left-volumes.js';
import { LifecycleQueue } from './lifecycle-queue.js';
import { MovingVolumes } from './moving-volumes.js';

/** A node that notes which volumes it was asked to delete, and holds one egress audit entry of each session until then. */
function fakeNode(nodeId: string) {
  const deleted: string[] = [];
  const audited = (sessionId: string): EgressAuditEntry => ({
    time: '2026-01-01T00:00:00.000Z',
    sandboxId: `sbx_on_${nodeId}`,
    scheme: 'http',
    host: 'plain.test',
    method: 'GET',
    path: `/from/${sessionId}`,
    status: 200,
    decision: 'allowed',
    bytesSent: 1,
    bytesReceived: 1,
    durationMs: 1,
    secrets: [],
  });
  const node = {
    nodeId,
    deleteVolume: async (id: string) => void deleted.push(id),
    deleteNamedVolume: async (id: string) => void deleted.push(id),
    egressAudit: async (id: string) => ({ entries: deleted.includes(id) ? [] : [audited(id)] }),
  };
  return { node: node as unknown as NodeClient, deleted };
}

/** A checkpoint taker that notes each rescue (session, node) and can be made to fail or to wait. */
function fakeTaker() {
  const taken: string[] = [];
  const taker = {
    fail: null as Error | null,
    gate: null as Promise<void> | null,
    async take(row: SessionRow, _kind: unknown, trigger: string, on?: NodeClient): Promise<CheckpointRow> {
      await taker.gate;
      if (taker.fail) throw taker.fail;
      taken.push(`${trigger} of ${row.id} on ${on?.nodeId}`);
      return { id: `ckp_${taken.length}` } as CheckpointRow;
    },
  };
  return { taker, taken };
}

/** A session that moved from node-a (lost) to node-b, leaving its volume on node-a. */
async function leftBehind() {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  await s.store.updateSession(session.id, { volumeNodeId: 'node-b', sandboxId: null, nodeId: null, status: 'stopped' });
  const { taker, taken } = fakeTaker();
  const log: string[] = [];
  const left = new LeftVolumes({
    store: s.store,
    taker,
    lifecycle: s.lifecycle,
    audit: s.egress,
    volumes: new MovingVolumes(s.store),
    log: (m) => log.push(m),
  });
  await left.record(session.id, 'node-a', []);
  const a = fakeNode('node-a');
  const row = async () => (await s.store.findSession(session.id))!;
  return { s, id: session.id, left, taker, taken, log, a, row };
}

const records = async (s: { store: { listLeftVolumes(): Promise<{ sessionId: string; nodeId: string }[]> } }) =>
  (await s.store.listLeftVolumes()).map((l) => `${l.sessionId}@${l.nodeId}`);

test('a left volume waits for its node, then is kept in a rescue checkpoint taken there, its egress audit kept in the store, and deleted there', async () => {
  const t = await leftBehind();
  await t.left.sweep(() => undefined);
  assert.deepEqual([t.taken, await records(t.s)], [[], [`${t.id}@node-a`]], 'nothing while the node does not answer');
  await t.left.sweep((nodeId) => (nodeId === 'node-a' ? t.a.node : undefined));
  assert.deepEqual(t.taken, [`rescue of ${t.id} on node-a`]);
  assert.deepEqual(t.a.deleted, [t.id]);
  assert.deepEqual(
    (await t.s.store.listArchivedEgressAudit(t.id, 10)).map((e) => [e.sandboxId, e.path]),
    [['sbx_on_node-a', `/from/${t.id}`]],
    "what the session's copy on node-a sent out is in the store before node-a deleted it",
  );
  assert.deepEqual(await records(t.s), []);
  await t.left.sweep(() => t.a.node);
  assert.equal(t.taken.length, 1, 'rescued once');
});

test('the left volume of a session deleted meanwhile is deleted, with no rescue', async () => {
  const t = await leftBehind();
  await t.s.sessions.delete(t.s.caller, t.id);
  await t.left.sweep(() => t.a.node);
  assert.deepEqual([t.taken, t.a.deleted, await records(t.s)], [[], [t.id], []]);
});

test('a session that moved back onto that node before the sweep keeps its volume there: only the record goes', async () => {
  const t = await leftBehind();
  await t.s.store.updateSession(t.id, { volumeNodeId: 'node-a' });
  await t.left.sweep(() => t.a.node);
  assert.deepEqual([t.taken, t.a.deleted, await records(t.s)], [[], [], []]);
});

test('a move back onto the node rescues first; the sweep that comes after finds nothing left', async () => {
  const t = await leftBehind();
  // The mover holds the session's turn while it moves the session onto node-a.
  await t.s.lifecycle.run(t.id, 'resume', async () => t.left.rescueBeforeArrival(await t.row(), t.a.node));
  await t.s.store.updateSession(t.id, { volumeNodeId: 'node-a' });
  assert.deepEqual(t.taken, [`rescue of ${t.id} on node-a`]);
  await t.left.sweep(() => t.a.node);
  assert.deepEqual([t.taken.length, t.a.deleted, await records(t.s)], [1, [], []], 'not rescued twice, and its new volume is not deleted');
  // Arriving on a node it left nothing on takes nothing.
  await t.left.rescueBeforeArrival(await t.row(), fakeNode('node-c').node);
  assert.equal(t.taken.length, 1);
});

test('a sweep while the move back holds the session leaves it for the next, which finds the record gone', async () => {
  const t = await leftBehind();
  let release!: () => void;
  t.taker.gate = new Promise<void>((r) => (release = r));
  const moving = t.s.lifecycle.run(t.id, 'resume', async () => {
    await t.left.rescueBeforeArrival(await t.row(), t.a.node);
    await t.s.store.updateSession(t.id, { volumeNodeId: 'node-a' });
  });
  await new Promise((r) => setTimeout(r, 20));
  // The session is busy: the sweep leaves it for the next one, and keeps the record.
  await t.left.sweep(() => t.a.node);
  assert.deepEqual(await records(t.s), [`${t.id}@node-a`]);
  release();
  await moving;
  t.taker.gate = null;
  await t.left.sweep(() => t.a.node);
  assert.deepEqual([t.taken, t.a.deleted, await records(t.s)], [[`rescue of ${t.id} on node-a`], [], []]);
});

test('two control planes sweeping at once rescue the volume once', async () => {
  const t = await leftBehind();
  // Another control plane on the same store: its own queue (leases in the store) and its own client of node-a.
  const other = new LeftVolumes({
    store: t.s.store,
    taker: t.taker,
    lifecycle: new LifecycleQueue(t.s.store, () => undefined, { pollMs: 5 }),
    audit: t.s.egress,
    volumes: new MovingVolumes(t.s.store),
    log: () => undefined,
  });
  const b = fakeNode('node-a');
  await Promise.all([t.left.sweep(() => t.a.node), other.sweep(() => b.node)]);
  assert.deepEqual(t.taken, [`rescue of ${t.id} on node-a`]);
  assert.deepEqual([...t.a.deleted, ...b.deleted], [t.id]);
  assert.deepEqual(await records(t.s), []);
});

test('a rescue that fails keeps the record and is tried again; one whose volume is already gone just drops it', async () => {
  const t = await leftBehind();
  t.taker.fail = new SpaceError(ErrorCode.NODE_UNAVAILABLE, 'node-a stopped answering');
  await t.left.sweep(() => t.a.node);
  assert.deepEqual([t.a.deleted, await records(t.s)], [[], [`${t.id}@node-a`]]);
  assert.match(t.log.join('\n'), /left on node node-a is not rescued yet: node-a stopped answering/);
  t.taker.fail = null;
  await t.left.sweep(() => t.a.node);
  assert.deepEqual([t.taken.length, await records(t.s)], [1, []]);

  const u = await leftBehind();
  u.taker.fail = new SpaceError(ErrorCode.SESSION_NOT_FOUND, 'no volume of that session here');
  await u.left.rescueBeforeArrival(await u.row(), u.a.node);
  assert.deepEqual(await records(u.s), []);
  u.taker.fail = new SpaceError(ErrorCode.NODE_UNAVAILABLE, 'down');
  await u.left.record(u.id, 'node-a', []);
  await assert.rejects(u.left.rescueBeforeArrival(await u.row(), u.a.node), /down/);
  assert.deepEqual(await records(u.s), [`${u.id}@node-a`], 'a move that cannot rescue fails, and the record stays');
});

test("the copies on the lost node of the tenant's volumes the session took along go with its volume there; one that lives there still stays", async () => {
  const t = await leftBehind();
  const volume = (id: string, nodeId: string) => ({
    id,
    tenantId: 'tn_test0001',
    name: id,
    nodeId,
    sizeGb: 1,
    createdAt: new Date().toISOString(),
    fromSnapshot: null,
    ownerSessionId: null,
  });
  // vol_movedaway01 moved to node-b with the session; vol_stayedhere1's move never happened.
  await t.s.store.insertVolume(volume('vol_movedaway01', 'node-b'));
  await t.s.store.insertVolume(volume('vol_stayedhere1', 'node-a'));
  await t.s.store.deleteLeftVolume(t.id, 'node-a');
  await t.left.record(t.id, 'node-a', ['vol_movedaway01', 'vol_stayedhere1', 'vol_deletedsince']);
  await t.left.sweep(() => t.a.node);
  assert.deepEqual(t.a.deleted, [t.id, 'vol_movedaway01', 'vol_deletedsince']);
  assert.deepEqual(await records(t.s), []);
});
