import assert from 'node:assert/strict';
import { test } from 'node:test';
import { servicesOnFakeNode } from '../test-support/services.js';

test("restore accepts checkpoints of the lineage (own, ancestor, a fork's) and refuses others", async () => {
  const s = await servicesOnFakeNode();
  const parent = await s.create();
  const own = await s.checkpoints.create(s.caller, parent.id);
  const [fork] = await s.checkpoints.fork(s.caller, own.id, 1);
  const inFork = await s.checkpoints.create(s.caller, fork!.id);
  const [grandchild] = await s.checkpoints.fork(s.caller, inFork.id, 1);
  const stranger = await s.create();
  const strangers = await s.checkpoints.create(s.caller, stranger.id);

  await s.checkpoints.restore(s.caller, parent.id, inFork.id); // keep the winner
  await s.checkpoints.restore(s.caller, fork!.id, own.id); // back to the ancestor's
  await s.checkpoints.restore(s.caller, grandchild!.id, own.id); // two generations up
  await s.checkpoints.restore(s.caller, parent.id, own.id);
  await assert.rejects(s.checkpoints.restore(s.caller, parent.id, strangers.id), { code: 'CHECKPOINT_NOT_IN_LINEAGE' });
  await assert.rejects(s.checkpoints.restore({ tenantId: 'tn_other0001', admin: false }, parent.id, own.id), { code: 'SESSION_NOT_FOUND' });
  assert.equal((await s.sessions.get(s.caller, parent.id)).status, 'running', 'restored onto a running sandbox');
});

test('a fork is all or nothing: when one copy fails, no forked session is left', async () => {
  const s = await servicesOnFakeNode();
  const parent = await s.create();
  const checkpoint = await s.checkpoints.create(s.caller, parent.id);
  s.node.checkpoints.delete(checkpoint.id); // the node lost it: every copy fails
  await assert.rejects(s.checkpoints.fork(s.caller, checkpoint.id, 3), { code: 'CHECKPOINT_NOT_FOUND' });
  assert.deepEqual(
    (await s.sessions.list(s.caller)).map((x) => x.id),
    [parent.id],
  );
});

test('retention keeps the newest automatic checkpoints of each kind, manual ones, those forked from and those a resume kept', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  const manual = await s.checkpoints.create(s.caller, session.id);
  const keptByResume = await s.checkpoints.create(s.caller, session.id, 'fs', 'resume');
  const autos = [];
  for (let i = 0; i < 4; i++) autos.push(await s.checkpoints.create(s.caller, session.id, 'fs', 'auto'));
  await s.checkpoints.fork(s.caller, autos[0]!.id, 1);
  await s.checkpoints.pruneLocked(session.id, 2);
  const left = (await s.checkpoints.list(s.caller, session.id)).map((c) => c.id);
  assert.deepEqual(left, [manual.id, keptByResume.id, autos[0]!.id, autos[2]!.id, autos[3]!.id]);
});
