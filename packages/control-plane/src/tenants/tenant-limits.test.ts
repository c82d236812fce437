import assert from 'node:assert/strict';
import { test } from 'node:test';
import { servicesOnFakeNode } from '../test-support/services.js';
import { TokenBuckets } from './token-buckets.js';

const counter = (text: string, name: string): number => Number(/^(\S+) (\d+)$/m.exec(text.split('\n').find((l) => l.startsWith(`${name} `)) ?? '')?.[2] ?? NaN);

test('a token bucket allows its burst, then says how long until the next token, and refills at its rate', () => {
  const clock = { now: 0 };
  const buckets = new TokenBuckets(10, 20, () => clock.now);
  for (let i = 0; i < 20; i++) assert.equal(buckets.take('a'), 0);
  assert.equal(buckets.take('a'), 100);
  assert.equal(buckets.take('b'), 0, 'another key has its own bucket');
  clock.now += 250;
  assert.equal(buckets.take('a'), 0);
  assert.equal(buckets.take('a'), 0);
  assert.ok(buckets.take('a') > 0, 'only 2.5 tokens came back in 250 ms');
  clock.now += 60_000;
  assert.equal(buckets.used('a'), 0, 'never more than the burst');
});

test('past its sessions a tenant gets QUOTA_EXCEEDED naming the limit and its setting; a fork that would not fit starts none', async () => {
  const s = await servicesOnFakeNode({ tenantMaxSessions: 2 });
  const first = await s.create();
  await s.create();
  await assert.rejects(s.create(), (err: { code: string; status: number; details: Record<string, unknown>; message: string }) => {
    assert.equal(err.code, 'QUOTA_EXCEEDED');
    assert.equal(err.status, 403);
    assert.deepEqual(
      { limit: err.details.limit, max: err.details.max, setting: err.details.setting },
      { limit: 'sessions', max: 2, setting: 'SPACE_TENANT_MAX_SESSIONS' },
    );
    assert.match(err.message, /SPACE_TENANT_MAX_SESSIONS/);
    return true;
  });
  assert.equal(await s.store.countSessions(s.caller.tenantId), 2, 'the refused creation left no session behind');
  await s.sessions.delete(s.caller, first.id);
  const survivor = (await s.store.listSessions(s.caller.tenantId))[0]!;
  const checkpoint = await s.checkpoints.create(s.caller, survivor.id, 'fs');
  await assert.rejects(s.checkpoints.fork(s.caller, checkpoint.id, 2), { code: 'QUOTA_EXCEEDED' });
  assert.equal(await s.store.countSessions(s.caller.tenantId), 1);
  assert.equal((await s.checkpoints.fork(s.caller, checkpoint.id, 1)).length, 1);
});

test('creations at once are bounded per tenant (429 with when to retry); ending one frees its place', async () => {
  const s = await servicesOnFakeNode({ tenantMaxConcurrentCreates: 3 });
  const endFork = s.limits.beginCreates(s.caller.tenantId, 2);
  const endCreate = s.limits.beginCreates(s.caller.tenantId, 1);
  assert.throws(() => s.limits.beginCreates(s.caller.tenantId, 1), {
    code: 'TOO_MANY_REQUESTS',
    details: { limit: 'concurrentCreates', max: 3, setting: 'SPACE_TENANT_MAX_CONCURRENT_CREATES', retryAfterSec: 1 },
  });
  assert.doesNotThrow(() => s.limits.beginCreates('tn_other001', 3)(), 'another tenant has its own count');
  endFork();
  endFork(); // a second call of the same end frees nothing more
  s.limits.beginCreates(s.caller.tenantId, 2)();
  endCreate();
  assert.equal((await s.limits.view(s.caller.tenantId)).limits.concurrentCreates?.used, 0);
});

test('control planes sharing a store share the limits on what tenants do at once: each holds a tenant to its part, rounded up', async () => {
  const s = await servicesOnFakeNode({ tenantMaxConcurrentCreates: 5, tenantRequestsPerSec: 10 });
  // Two more control planes heard on the store: this one is one of three.
  for (const other of ['cp-b/1', 'cp-c/1']) await s.store.heardControlPlane(other, s.clock.now);
  await s.roster.beat();
  assert.equal(s.roster.size, 3);
  const end = s.limits.beginCreates(s.caller.tenantId, 2);
  assert.throws(() => s.limits.beginCreates(s.caller.tenantId, 1), {
    code: 'TOO_MANY_REQUESTS',
    message: /at most 5 session creations under way at once \(2 through this control plane, one of 3 sharing the limit\)/,
    details: { limit: 'concurrentCreates', max: 5, setting: 'SPACE_TENANT_MAX_CONCURRENT_CREATES', retryAfterSec: 1 },
  });
  end();
  // The rate: 10/s and bursts of 20 for all, so a third of them here.
  const buckets = new TokenBuckets(
    10,
    20,
    () => s.clock.now,
    () => 1 / s.roster.size,
  );
  let allowed = 0;
  while (buckets.take('a') === 0) allowed++;
  assert.equal(allowed, 6, 'a third of the burst (rounded down to whole tokens)');
  // Alone again (the others gone), the whole limit.
  s.clock.now += 10_000;
  await s.roster.beat();
  assert.equal(s.roster.size, 1);
  s.limits.beginCreates(s.caller.tenantId, 5)();
});

/** A memory image of 1 GiB recorded for the session, as another control plane's full checkpoint would be. */
function keepImageOfOneGb(s: Awaited<ReturnType<typeof servicesOnFakeNode>>, sessionId: string, id: string): Promise<void> {
  return s.store.insertCheckpoint({
    id,
    sessionId,
    tenantId: s.caller.tenantId,
    kind: 'full',
    trigger: 'manual',
    nodeId: 'n',
    createdAt: new Date(s.clock.now).toISOString(),
    sizeBytes: 1024 ** 3,
    pauseMs: 1,
    volumes: [],
  });
}

test('a full checkpoint past the checkpoint storage limit becomes an fs checkpoint: the refusal names it, nothing is lost', async () => {
  const s = await servicesOnFakeNode({ tenantMaxCheckpointGb: 1 });
  const session = await s.create();
  // A memory image of 1 GiB is already kept.
  await keepImageOfOneGb(s, session.id, 'ckp_big00001');
  const refusal = await s.checkpoints.create(s.caller, session.id, 'full').then(
    () => assert.fail('taken past the limit'),
    (err: { code: string; details: Record<string, unknown> }) => err,
  );
  assert.equal(refusal.code, 'QUOTA_EXCEEDED');
  assert.equal(refusal.details.limit, 'checkpointStorageBytes');
  assert.equal(refusal.details.setting, 'SPACE_TENANT_MAX_CHECKPOINT_GB');
  assert.equal((await s.store.knownCheckpoints([String(refusal.details.fallbackCheckpointId)])).size, 1);
  assert.match(s.metrics.render({}), /space_full_checkpoint_fallbacks_total\{reason="quota"\} 1/);
  assert.equal((await s.checkpoints.create(s.caller, session.id, 'fs')).kind, 'fs', 'fs checkpoints are not held back');
  const view = await s.limits.view(s.caller.tenantId);
  assert.equal(view.limits.checkpointStorageBytes?.used, 1024 ** 3);
  assert.equal(view.limits.sessions?.used, 1);
});

test('checkpoint storage far below its maximum is not summed again for each full checkpoint within a second', async () => {
  const s = await servicesOnFakeNode({ tenantMaxCheckpointGb: 1 });
  const session = await s.create({ resources: { memoryMb: 128 } });
  await s.checkpoints.create(s.caller, session.id, 'full');
  // Another control plane's memory image fills the storage: this one sees it at its next read, a second later.
  await keepImageOfOneGb(s, session.id, 'ckp_big00002');
  assert.equal((await s.checkpoints.create(s.caller, session.id, 'full')).kind, 'full', 'read less than a second ago, far below');
  s.clock.now += 1000;
  await assert.rejects(s.checkpoints.create(s.caller, session.id, 'full'), { code: 'QUOTA_EXCEEDED' });
});

test('memory images allowed since the last read count at their largest: near half the maximum, the sum is read again', async () => {
  const s = await servicesOnFakeNode({ tenantMaxCheckpointGb: 1 });
  // 200 MB each: the third would pass half of 1 GB (counted at its largest), so the store is read and the refusal comes.
  const session = await s.create({ resources: { memoryMb: 200 } });
  await s.checkpoints.create(s.caller, session.id, 'full');
  await keepImageOfOneGb(s, session.id, 'ckp_big00003');
  assert.equal((await s.checkpoints.create(s.caller, session.id, 'full')).kind, 'full', '400 MB counted: under half');
  await assert.rejects(s.checkpoints.create(s.caller, session.id, 'full'), { code: 'QUOTA_EXCEEDED' });
});

test('sessions get the default disk unless they name one', async () => {
  const s = await servicesOnFakeNode();
  assert.equal((await s.create()).resources.diskGb, 10);
  assert.equal((await s.create({ resources: { diskGb: 0.5 } })).resources.diskGb, 0.5);
});

test('a burst of creations past the limit waits its turn, first come first served, instead of being refused; past the queue, or after waiting too long, 429', async () => {
  const s = await servicesOnFakeNode({ tenantMaxConcurrentCreates: 2, tenantMaxQueuedCreates: 3, tenantCreateQueueWaitSec: 0.3 });
  const tenant = s.caller.tenantId;
  const order: number[] = [];
  let releaseAll!: () => void;
  const held = new Promise<void>((resolve) => (releaseAll = resolve));
  // Two run, three wait: each one's work records when it began.
  const creations = [0, 1, 2, 3, 4].map((i) =>
    s.limits.whileCreating(tenant, 1, async () => {
      order.push(i);
      if (i < 2) await held;
    }),
  );
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(order, [0, 1], 'two at once');
  await assert.rejects(s.limits.admitCreates(tenant, 1), {
    code: 'TOO_MANY_REQUESTS',
    message: /2 session creations under way at once and 3 waiting for room/,
  });
  await assert.rejects(s.limits.admitCreates(tenant, 3), { code: 'TOO_MANY_REQUESTS' }, 'a fork of more than the limit, at once');
  releaseAll();
  await Promise.all(creations);
  assert.deepEqual(order, [0, 1, 2, 3, 4], 'the waiting ones in their order');
  assert.equal(counter(s.metrics.render({}), 'space_creates_queued_total'), 3);
  // One that waits longer than the wait allows is refused, and leaves the queue.
  const endBoth = s.limits.beginCreates(tenant, 2);
  await assert.rejects(s.limits.admitCreates(tenant, 1), { code: 'TOO_MANY_REQUESTS', message: /this one waited 0.3 s for room/ });
  endBoth();
  (await s.limits.admitCreates(tenant, 2))();
});
