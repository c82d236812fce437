import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { IncomingMessage } from 'node:http';
import { ErrorCode, isSpaceError } from '@space/protocol';
import { servicesOnFakeNode } from '../test-support/services.js';

test('a pause takes a full checkpoint and stops the sandbox; a second pause is a conflict; the next call resumes the session', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const checkpoint = await s.pauser.pause(s.caller, session.id);
  assert.deepEqual([checkpoint.kind, checkpoint.trigger], ['full', 'auto']);
  const paused = await s.sessions.get(s.caller, session.id);
  assert.deepEqual([paused.status, paused.sandbox, paused.sandboxHistory!.at(-1)!.endReason], ['idle', null, 'paused']);
  await assert.rejects(s.pauser.pause(s.caller, session.id), (err) => isSpaceError(err) && err.code === ErrorCode.SESSION_NOT_RUNNING);
  const row = await s.sessions.row(s.caller, session.id);
  await s.sessions.ensureSandbox(row);
  assert.equal((await s.sessions.get(s.caller, session.id)).status, 'running');
});

test('timeouts: a session is deleted, or paused with its timeout cleared, once its timeout passes; 0 removes it', async () => {
  const s = await servicesOnFakeNode();
  const deleted = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const paused = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const kept = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  await s.pauser.setTimeout(s.caller, deleted.id, 30);
  await s.pauser.setTimeout(s.caller, paused.id, 30, 'pause');
  await s.pauser.setTimeout(s.caller, kept.id, 30);
  await s.pauser.setTimeout(s.caller, kept.id, 0);
  assert.equal((await s.sessions.get(s.caller, paused.id)).expiresAt, new Date(s.clock.now + 30_000).toISOString());

  s.clock.now += 29_000;
  await s.maintenance.tick();
  assert.equal((await s.sessions.list(s.caller)).length, 3, 'nothing before the timeout');
  s.clock.now += 2000;
  await s.maintenance.tick();
  const left = new Map((await s.sessions.list(s.caller)).map((x) => [x.id, x]));
  assert.equal(left.has(deleted.id), false, 'onTimeout delete: gone');
  assert.deepEqual([left.get(paused.id)!.status, left.get(paused.id)!.expiresAt, left.get(paused.id)!.onTimeout], ['idle', null, 'pause']);
  assert.deepEqual([left.get(kept.id)!.status, left.get(kept.id)!.expiresAt], ['running', null]);
});

test('a session token reads its session and drives its sandbox, and nothing else', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const other = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const { token } = await s.auth.createSessionToken(s.caller.tenantId, session.id);
  const as = (method: string, url: string) => s.auth.authenticate({ method, url, headers: { authorization: `Bearer ${token}` } } as IncomingMessage);
  const base = `/v1/sessions/${session.id}`;
  for (const [method, url] of [
    ['GET', base],
    ['POST', `${base}/exec`],
    ['GET', `${base}/exec/stream`],
    ['GET', `${base}/files?path=/tmp/x`],
    ['PUT', `${base}/files?path=/tmp/x`],
    ['POST', `${base}/processes/12/signal`],
  ]) {
    assert.deepEqual(await as(method!, url!), { tenantId: s.caller.tenantId, admin: false, sessionId: session.id }, `${method} ${url}`);
  }
  for (const [method, url] of [
    ['DELETE', base],
    ['POST', `${base}/tokens`],
    ['POST', `${base}/restore`],
    ['POST', `${base}/checkpoints`],
    ['GET', `/v1/sessions/${other.id}`],
    ['POST', `/v1/sessions/${other.id}/exec`],
    ['GET', '/v1/sessions'],
    ['POST', '/v1/sessions'],
    ['GET', `${base}/../${other.id}`],
  ]) {
    await assert.rejects(as(method!, url!), (err) => isSpaceError(err) && err.code === ErrorCode.FORBIDDEN, `${method} ${url}`);
  }
  await s.sessions.delete(s.caller, session.id);
  await assert.rejects(as('GET', base), (err) => isSpaceError(err) && err.code === ErrorCode.UNAUTHORIZED, 'deleted with its session');
});
