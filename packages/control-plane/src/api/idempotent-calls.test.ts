import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, SpaceError } from '@space/protocol';
import { Router, closeServer, lineLog, listen, sendJson } from '@space/server-kit';
import { openSqliteStore } from '../store/open-store.js';
import { IdempotentCalls } from './idempotent-calls.js';

/** A real server whose routes are wrapped as the public API wraps them, over a real store, with a settable clock. */
async function served(options: { claimMs?: number } = {}) {
  const clock = { now: 1_000_000 };
  const store = await openSqliteStore(':memory:');
  const calls = new IdempotentCalls({
    store,
    tenantOf: async (req) => String(req.headers['x-tenant'] ?? 'tn_a'),
    keepMs: 60_000,
    claimMs: options.claimMs ?? 30_000,
    now: () => clock.now,
    log: () => undefined,
  });
  const ran: string[] = [];
  const gate = { wait: null as Promise<void> | null };
  const router = new Router({ log: lineLog(() => undefined), service: 'cp', around: (_m, _p, handler) => calls.wrap(handler) });
  router.on('POST', '/append', async ({ res }) => {
    ran.push('append');
    await gate.wait;
    sendJson(res, 200, { lines: ran.length });
  });
  router.on('POST', '/other', async ({ res }) => sendJson(res, 200, { ok: true }));
  router.on('POST', '/refused', async () => {
    ran.push('refused');
    throw new SpaceError(ErrorCode.FILE_NOT_FOUND, 'no such file');
  });
  router.on('POST', '/unavailable', async () => {
    ran.push('unavailable');
    throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, 'node down');
  });
  const { server, port } = await listen(router, '127.0.0.1', 0);
  const call = async (path: string, key?: string, tenant = 'tn_a') => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method: 'POST',
      headers: { 'x-tenant': tenant, ...(key === undefined ? {} : { 'idempotency-key': key }) },
    });
    return { status: res.status, body: await res.json(), replayed: res.headers.get('idempotent-replayed'), retryAfter: res.headers.get('retry-after') };
  };
  return { clock, store, ran, gate, call, close: () => closeServer(server) };
}

test('a retry with the same key gets the first outcome without running again; without a key, or with another, it runs', async () => {
  const t = await served();
  try {
    const first = await t.call('/append', 'key-1');
    const retry = await t.call('/append', 'key-1');
    assert.deepEqual([first.status, first.body, first.replayed], [200, { lines: 1 }, null]);
    assert.deepEqual([retry.status, retry.body, retry.replayed], [200, { lines: 1 }, 'true']);
    assert.deepEqual(t.ran, ['append'], 'run once');
    assert.deepEqual((await t.call('/append')).body, { lines: 2 });
    assert.deepEqual((await t.call('/append', 'key-2')).body, { lines: 3 });
    assert.deepEqual((await t.call('/append', 'key-1', 'tn_b')).body, { lines: 4 }, "keys are per tenant: another's is another key");
  } finally {
    await t.close();
  }
});

test('a retry while the first call runs is told to wait; a key used on another path is refused; a malformed key is refused', async () => {
  const t = await served();
  try {
    let open!: () => void;
    t.gate.wait = new Promise((resolve) => (open = resolve));
    const first = t.call('/append', 'key-1');
    while (t.ran.length === 0) await new Promise((r) => setTimeout(r, 5));
    const early = await t.call('/append', 'key-1');
    assert.deepEqual([early.status, early.body.error.code, early.retryAfter], [409, 'IDEMPOTENCY_IN_PROGRESS', '1']);
    open();
    assert.equal((await first).status, 200);
    const reused = await t.call('/other', 'key-1');
    assert.equal(reused.status, 422);
    assert.match(reused.body.error.message, /was used for POST \/append, not POST \/other/);
    const bad = await t.call('/append', 'bad key with spaces');
    assert.deepEqual([bad.status, bad.body.error.code], [400, 'VALIDATION_FAILED']);
    assert.deepEqual(t.ran, ['append'], 'neither the early retry nor the refused ones ran');
  } finally {
    await t.close();
  }
});

test("an error outcome is kept like any other; one that says the call may not have run is not, and a retry runs; a dead control plane's claim lapses", async () => {
  const t = await served({ claimMs: 30_000 });
  try {
    assert.equal((await t.call('/refused', 'k-refused')).status, 404);
    const again = await t.call('/refused', 'k-refused');
    assert.deepEqual([again.status, again.body.error.code, again.replayed], [404, 'FILE_NOT_FOUND', 'true']);
    assert.equal((await t.call('/unavailable', 'k-down')).status, 503);
    assert.equal((await t.call('/unavailable', 'k-down')).status, 503);
    assert.deepEqual(t.ran, ['refused', 'unavailable', 'unavailable']);

    // A claim left by a control plane that died mid-call: retries wait, then run once it lapses.
    await t.store.claimIdempotencyKey({ tenantId: 'tn_a', key: 'k-orphan', operation: 'POST /append', expiresAt: t.clock.now + 30_000 }, t.clock.now);
    assert.equal((await t.call('/append', 'k-orphan')).status, 409);
    t.clock.now += 30_001;
    assert.equal((await t.call('/append', 'k-orphan')).status, 200);
    // Kept outcomes expire too, and are swept.
    t.clock.now += 60_001;
    assert.equal(await t.store.deleteExpiredIdempotencyKeys(t.clock.now), 2);
    assert.equal((await t.call('/refused', 'k-refused')).replayed, null, 'past its keeping time a key runs anew');
  } finally {
    await t.close();
  }
});
