import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openSqliteStore } from '../store/open-store.js';
import { ControlPlaneRoster } from './control-plane-roster.js';

const ids = Array.from({ length: 600 }, (_, i) => `ses_${String(i).padStart(8, '0')}`);

test("the control planes on a store split the sessions between them, each once; a dead one's share goes to the others once it is gone, a stopped one's at once", async () => {
  const store = await openSqliteStore(':memory:');
  const clock = { now: 1_000_000 };
  const log: string[] = [];
  const roster = (id: string) => new ControlPlaneRoster(store, id, { beatMs: 1000, goneAfterMs: 3000, now: () => clock.now, log: (m) => log.push(m) });
  const [a, b, c] = [roster('cp-a/1'), roster('cp-b/1'), roster('cp-c/1')];
  assert.ok(
    ids.every((id) => a.owns(id)),
    'alone (before its first beat), a control plane has every session',
  );
  for (const r of [a, b, c]) await r.beat();
  await a.beat();
  await b.beat();
  assert.deepEqual([a.size, b.size, c.size], [3, 3, 3]);
  const shares = [a, b, c].map((r) => ids.filter((id) => r.owns(id)).length);
  assert.equal(
    shares.reduce((x, y) => x + y),
    ids.length,
    'every session in exactly one share',
  );
  assert.ok(
    shares.every((n) => n > 120),
    `shares near a third each: ${shares}`,
  );
  for (const id of ids) assert.equal([a, b, c].filter((r) => r.owns(id)).length, 1);

  // c dies (no more beats): once it is gone, a and b split everything.
  clock.now += 2000;
  await b.beat();
  await a.beat();
  assert.equal(a.size, 3, 'not gone yet');
  clock.now += 2000;
  await a.beat();
  await b.beat();
  assert.deepEqual([a.size, b.size], [2, 2]);
  for (const id of ids) assert.equal([a, b].filter((r) => r.owns(id)).length, 1);
  assert.match(log.join('\n'), /control planes sharing the maintenance: 2 \(cp-a\/1, cp-b\/1\)/);

  // b stops and leaves: a has everything at its next beat.
  await b.leave();
  await a.beat();
  assert.equal(a.size, 1);
  assert.ok(ids.every((id) => a.owns(id)));
});
