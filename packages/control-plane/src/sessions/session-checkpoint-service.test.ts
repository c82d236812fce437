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

test("forks with secrets of their own: a name the parent had keeps its placeholder for the fork's value; revoking touches one session", async () => {
  const s = await servicesOnFakeNode();
  const put = (name: string, value: string) => s.egress.put(s.caller, name, { value, hosts: [`${name.toLowerCase()}.example.com`] });
  const token = await put('TOKEN', 'v-token');
  const readOnly = await put('TOKEN_RO', 'v-token-ro');
  const parent = await s.create({ secrets: ['TOKEN'] });
  const checkpoint = await s.checkpoints.create(s.caller, parent.id);
  const injected = (sessionId: string) => s.node.egress.get(sessionId)?.secrets.map(({ name, placeholder, value }) => ({ name, placeholder, value }));
  assert.deepEqual(injected(parent.id), [{ name: 'TOKEN', placeholder: token.placeholder, value: 'v-token' }]);

  // The read-only token under the name the parent's processes know; the parent's token under another name.
  const [fork] = await s.checkpoints.fork(s.caller, checkpoint.id, 1, [
    { name: 'TOKEN', secret: 'TOKEN_RO' },
    { name: 'FULL', secret: 'TOKEN' },
  ]);
  assert.deepEqual(fork!.secrets, [
    { name: 'TOKEN', secret: 'TOKEN_RO' },
    { name: 'FULL', secret: 'TOKEN' },
  ]);
  const [asToken, asFull] = injected(fork!.id)!;
  assert.deepEqual(asToken, { name: 'TOKEN', placeholder: token.placeholder, value: 'v-token-ro' }, "the parent's placeholder, the fork's value");
  assert.notEqual(asToken!.placeholder, readOnly.placeholder);
  assert.equal(asFull!.value, 'v-token');
  assert.ok(asFull!.placeholder.startsWith('SPACE_SECRET_FULL_') && asFull!.placeholder !== token.placeholder, 'one placeholder, one value');
  const forkRow = await s.sessions.row(s.caller, fork!.id);
  assert.deepEqual(await s.egress.placeholders(forkRow), { TOKEN: token.placeholder, FULL: asFull!.placeholder }, 'what its new processes see');
  // By default a fork has its parent's secrets; none when asked.
  const [plain, bare] = [...(await s.checkpoints.fork(s.caller, checkpoint.id, 1)), ...(await s.checkpoints.fork(s.caller, checkpoint.id, 1, []))];
  assert.deepEqual(plain!.secrets, ['TOKEN']);
  assert.deepEqual([bare!.secrets, injected(bare!.id)], [[], []]);
  await assert.rejects(s.checkpoints.fork(s.caller, checkpoint.id, 1, [{ name: 'TOKEN', secret: 'NOPE' }]), { code: 'SECRET_NOT_FOUND' });

  // Revoked from the fork only: the parent and the other fork keep theirs; again is harmless.
  await s.egress.revoke(forkRow, 'TOKEN');
  assert.deepEqual(
    injected(fork!.id)!.map((g) => g.name),
    ['FULL'],
  );
  assert.deepEqual((await s.sessions.get(s.caller, fork!.id)).secrets, [{ name: 'FULL', secret: 'TOKEN' }]);
  await s.egress.revoke(forkRow, 'TOKEN');
  assert.deepEqual(
    injected(fork!.id)!.map((g) => g.name),
    ['FULL'],
  );
  assert.deepEqual(injected(parent.id), [{ name: 'TOKEN', placeholder: token.placeholder, value: 'v-token' }]);
  assert.deepEqual(
    injected(plain!.id)!.map((g) => g.value),
    ['v-token'],
  );
  // Revocations at once, each from the same stale read: every one holds.
  await Promise.all([s.egress.revoke(forkRow, 'FULL'), s.egress.revoke(forkRow, 'TOKEN')]);
  assert.deepEqual((await s.sessions.get(s.caller, fork!.id)).secrets, []);
});
