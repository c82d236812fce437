import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LifecycleQueue } from './lifecycle-queue.js';
import { type StoreEngine, storeEngines } from '../test-support/store-engines.js';
import { session } from '../test-support/store-rows.js';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const engines = storeEngines();

/** Two control planes: two queues on two connections to one database. */
async function twoReplicas(engine: StoreEngine, name: string, options: ConstructorParameters<typeof LifecycleQueue>[2] = {}) {
  const stores = [await engine.open(name), await engine.open(name)];
  const queues = stores.map((store) => new LifecycleQueue(store, () => undefined, { pollMs: 5, ...options }));
  return { stores, a: queues[0]!, b: queues[1]! };
}

for (const engine of engines.all) {
  test(`${engine.name}: operations on one session never overlap, within a process or across two sharing the store`, async () => {
    const { a, b } = await twoReplicas(engine, 'overlap');
    let running = 0;
    let most = 0;
    const op = (queue: LifecycleQueue) =>
      queue.run('ses_one', 'restore', async () => {
        most = Math.max(most, ++running);
        await pause(15);
        running--;
      });
    await Promise.all([op(a), op(b), op(a), op(b), op(a), op(b)]);
    assert.equal(most, 1);
    // Other sessions are not held up.
    const slow = a.run('ses_slow', 'checkpoint', () => pause(200));
    const started = Date.now();
    await b.run('ses_other', 'delete', async () => undefined);
    assert.ok(Date.now() - started < 100);
    await slow;
  });

  test(`${engine.name}: operations of different sessions nest (a fork holds its new session, then briefly its parent)`, async () => {
    const { a, b } = await twoReplicas(engine, 'nested');
    const order: string[] = [];
    await a.run('ses_child', 'create', async () => {
      order.push('child');
      await b.run('ses_parent', 'fork', async () => void order.push('parent'));
    });
    assert.deepEqual(order, ['child', 'parent']);
  });

  test(`${engine.name}: a new session is written with its lease: another process finds neither without the other, and waits; the lease goes when the work ends, failed or not`, async () => {
    const { stores, a, b } = await twoReplicas(engine, 'new-session');
    await stores[0]!.insertTenant({ id: 'tn_new', name: 'new', createdAt: '' });
    const order: string[] = [];
    const create = a.runNew(
      'ses_new',
      'create',
      (lease) => stores[0]!.insertSession(session('ses_new', 'tn_new'), lease),
      async () => {
        const seen = await stores[1]!.getSessionWithLease('tn_new', 'ses_new');
        assert.equal(seen?.lease?.operation, 'create', 'the row is never there without its lease');
        await pause(50);
        order.push('create');
      },
    );
    await pause(10);
    await b.run('ses_new', 'delete', async () => void order.push('delete'));
    await create;
    assert.deepEqual(order, ['create', 'delete'], 'another process waited for the create');
    assert.equal(await stores[1]!.getSessionLease('ses_new'), null, 'released');
    await assert.rejects(
      a.runNew(
        'ses_failed',
        'create',
        (lease) => stores[0]!.insertSession(session('ses_failed', 'tn_new'), lease),
        async () => {
          throw new Error('the node refused');
        },
      ),
      /the node refused/,
    );
    assert.equal(await stores[1]!.getSessionLease('ses_failed'), null, 'released after a failure too');
  });

  test(`${engine.name}: a create whose start releases its lease in the start's own statement is not released again; a stale start releases nothing`, async () => {
    const store = await engine.open('start-releases');
    let releases = 0;
    const counting = new Proxy(store, {
      get: (target, key) =>
        key === 'releaseSessionLease'
          ? (...args: Parameters<typeof store.releaseSessionLease>) => (releases++, target.releaseSessionLease(...args))
          : Reflect.get(target, key),
    });
    const queue = new LifecycleQueue(counting, () => undefined, { pollMs: 5 });
    await store.insertTenant({ id: 'tn_s', name: 's', createdAt: '' });
    const start = (sessionId: string) => ({
      id: `sbx_${sessionId}`,
      sessionId,
      nodeId: 'n',
      startedAt: '2026-01-01T00:00:00.000Z',
      endedAt: null,
      endReason: null,
      restoredFrom: null,
      note: null,
    });
    const created = (sessionId: string, epoch: number) =>
      queue.runNew(
        sessionId,
        'create',
        (lease) => store.insertSession(session(sessionId, 'tn_s'), lease),
        async (lease) => {
          const recorded = await store.recordPlacedStart(epoch, { status: 'running' }, start(sessionId), lease.holder);
          if (recorded) lease.released = true;
          assert.equal((await store.getSessionLease(sessionId)) === null, recorded, 'released in the start exactly when the start is recorded');
        },
      );
    await created('ses_placed', 0);
    assert.equal(releases, 0, 'no statement of its own');
    assert.equal((await store.getSession('tn_s', 'ses_placed'))?.status, 'running');
    await created('ses_stale', 7);
    assert.equal(releases, 1, 'a start not recorded leaves the lease to the queue');
    assert.equal(await store.getSessionLease('ses_stale'), null);
  });

  test(`${engine.name}: a call that waits past its bound gets SESSION_BUSY naming the operation, and nothing of it runs`, async () => {
    const { a, b } = await twoReplicas(engine, 'busy', { waitMs: 50 });
    const long = a.run('ses_busy', 'restore', () => pause(300));
    await pause(10);
    let ran = false;
    for (const queue of [a, b]) {
      await assert.rejects(
        queue.run('ses_busy', 'delete', async () => void (ran = true)),
        (err: { code?: string; details?: { operation?: string } }) => err.code === 'SESSION_BUSY' && err.details?.operation === 'restore',
      );
    }
    await assert.rejects(b.settled('ses_busy'), { code: 'SESSION_BUSY' });
    assert.equal(ran, false);
    await long;
    await b.settled('ses_busy');
    await b.run('ses_busy', 'delete', async () => void (ran = true));
    assert.equal(ran, true);
  });

  test(`${engine.name}: settled() waits for an operation running in another process`, async () => {
    const { a, b } = await twoReplicas(engine, 'settled');
    let done = false;
    const op = a.run('ses_set', 'restore', async () => {
      await pause(100);
      done = true;
    });
    await pause(10);
    await b.settled('ses_set');
    assert.equal(done, true);
    await op;
  });

  test(`${engine.name}: the lease of a replica that died expires, and another takes the session over`, async () => {
    const { stores, b } = await twoReplicas(engine, 'expiry', { leaseMs: 200 });
    // What a replica killed in the middle of an operation leaves: a lease nobody renews.
    assert.equal(
      await stores[0]!.acquireSessionLease({ sessionId: 'ses_dead', holder: 'dead-1', operation: 'restore', expiresAt: Date.now() + 200 }, Date.now()),
      true,
    );
    const started = Date.now();
    await b.run('ses_dead', 'resume', async () => undefined);
    const waited = Date.now() - started;
    assert.ok(waited >= 150 && waited < 2000, `waited ${waited} ms`);
    assert.equal(await stores[1]!.getSessionLease('ses_dead'), null, 'released after the operation');
  });

  test(`${engine.name}: a long operation keeps its lease by renewing it`, async () => {
    const { a, b } = await twoReplicas(engine, 'renew', { leaseMs: 90, waitMs: 60 });
    const long = a.run('ses_long', 'checkpoint', () => pause(300));
    await pause(150);
    // Past the first lease period the other replica still finds the session held.
    await assert.rejects(
      b.run('ses_long', 'delete', async () => undefined),
      { code: 'SESSION_BUSY' },
    );
    await long;
  });

  test(`${engine.name}: a process in the seat of one that died releases the leases it left at once; other seats' stay until they expire`, async () => {
    const stores = [await engine.open('seats'), await engine.open('seats')];
    const forever = 4_000_000_000_000;
    // Left by the dead process in seat host:8080, and held by a live one in seat host:8081.
    await stores[0]!.acquireSessionLease({ sessionId: 'ses_left', holder: 'host:8080/dead-1', operation: 'resume', expiresAt: forever }, 0);
    await stores[0]!.acquireSessionLease({ sessionId: 'ses_held', holder: 'host:8081/live-1', operation: 'checkpoint', expiresAt: forever }, 0);
    const successor = new LifecycleQueue(stores[1]!, () => undefined, { pollMs: 5, waitMs: 100, seat: 'host:8080' });
    assert.equal(await successor.releasePredecessors(false), 1);
    await successor.run('ses_left', 'resume', async () => undefined);
    await assert.rejects(
      successor.run('ses_held', 'delete', async () => undefined),
      { code: 'SESSION_BUSY' },
    );
    // A queue with no seat releases nothing; with a store of its own (`everyone`), all.
    assert.equal(await new LifecycleQueue(stores[1]!, () => undefined).releasePredecessors(false), 0);
    assert.equal(await new LifecycleQueue(stores[1]!, () => undefined, { seat: 'local' }).releasePredecessors(true), 1);
    assert.equal(await stores[0]!.getSessionLease('ses_held'), null);
  });
}
