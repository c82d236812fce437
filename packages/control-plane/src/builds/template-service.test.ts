import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CreateSessionRequestSchema, CreateTemplateRequestSchema } from '@space/protocol';
import { servicesOnFakeNode } from '../test-support/services.js';

test("a template from a session: new sessions start from its newest version; other tenants don't see it; deletion waits for its sessions", async () => {
  const s = await servicesOnFakeNode();
  const source = await s.create();
  const v1 = await s.templates.create(s.caller, { name: 'py-env', fromSession: source.id });
  assert.deepEqual([v1.name, v1.version, v1.builtIn, v1.sessions], ['py-env', 1, false, 0]);
  assert.equal((await s.checkpoints.list(s.caller, source.id)).at(-1)!.id, v1.fromCheckpoint, 'an fs checkpoint of the session was taken first');

  const fromV1 = await s.create({ template: 'py-env' });
  const nodeTemplate = (id: string) => [...s.node.sandboxes.values()].find((x) => x.sessionId === id)!.template;
  const [v1Id] = [...s.node.templates];
  assert.equal(nodeTemplate(fromV1.id), v1Id);

  const v2 = await s.templates.create(s.caller, { name: 'py-env', fromCheckpoint: v1.fromCheckpoint! });
  assert.equal(v2.version, 2);
  const fromV2 = await s.create({ template: 'py-env' });
  assert.notEqual(nodeTemplate(fromV2.id), v1Id, 'new sessions get the newest version');
  assert.deepEqual(
    (await s.catalog.list(s.caller.tenantId)).map((t) => `${t.name}@${t.version}:${t.sessions}`),
    ['base@0:0', 'tiny@0:1', 'code-interpreter@0:0', 'desktop@0:0', 'py-env@2:2'],
  );

  const other = { tenantId: 'tn_other0001', admin: false };
  await s.store.insertTenant({ id: other.tenantId, name: 'other', createdAt: new Date().toISOString() });
  await assert.rejects(s.sessions.create(other, CreateSessionRequestSchema.parse({ template: 'py-env' })), { code: 'UNKNOWN_TEMPLATE' });
  assert.deepEqual(
    (await s.catalog.list(other.tenantId)).map((t) => t.name),
    ['base', 'tiny', 'code-interpreter', 'desktop'],
  );
  await assert.rejects(s.templates.create(other, { name: 'stolen', fromCheckpoint: v1.fromCheckpoint! }), { code: 'CHECKPOINT_NOT_FOUND' });
  await assert.rejects(s.templates.delete(other, 'py-env', true), { code: 'TEMPLATE_NOT_FOUND' });

  await assert.rejects(s.templates.delete(s.caller, 'py-env', false), { code: 'TEMPLATE_IN_USE', details: { sessions: 2 } });
  await assert.rejects(s.templates.delete(s.caller, 'tiny', true), { code: 'FORBIDDEN' });
  await s.templates.delete(s.caller, 'py-env', true);
  assert.equal(s.node.templates.size, 0, 'every version is gone from the node');
  // Its sessions keep running and resume on their own volumes.
  await s.sessions.killSandbox(s.caller, fromV2.id);
  await s.calls.withSandbox(s.caller, fromV2.id, { repeatable: true }, async () => 'ok');
  await assert.rejects(s.create({ template: 'py-env' }), { code: 'UNKNOWN_TEMPLATE' });
});

test('template requests: a built-in name or both sources are refused at the boundary', () => {
  assert.equal(CreateTemplateRequestSchema.safeParse({ name: 'base', fromSession: 'ses_x' }).success, false);
  assert.equal(CreateTemplateRequestSchema.safeParse({ name: 'mine', fromSession: 'ses_x', fromCheckpoint: 'ckp_x' }).success, false);
  assert.equal(CreateTemplateRequestSchema.safeParse({ name: 'mine' }).success, false);
  assert.equal(CreateTemplateRequestSchema.safeParse({ name: 'Mine!', fromSession: 'ses_x' }).success, false);
  assert.equal(CreateTemplateRequestSchema.safeParse({ name: 'mine', fromSession: 'ses_x' }).success, true);
});
