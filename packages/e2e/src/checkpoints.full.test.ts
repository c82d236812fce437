import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, test } from 'node:test';
import { Api } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

describe('filesystem checkpoints, fork and restore', () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];
  const created = async (body: Record<string, unknown> = { template: 'tiny' }): Promise<any> => {
    const session = await api.createSession(body);
    sessions.push(session.id);
    return session;
  };
  const checkpoint = async (sessionId: string): Promise<any> => {
    const reply = await api.call('POST', `/v1/sessions/${sessionId}/checkpoints`, { kind: 'fs' });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    return reply.body;
  };
  const read = async (sessionId: string, path: string): Promise<string> => (await api.exec(sessionId, ['cat', path])).stdout;

  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)));

  test('restore to an older checkpoint drops later changes', { timeout: 120_000 }, async () => {
    const session = await created();
    await api.exec(session.id, 'echo v1 > /workspace/state');
    const first = await checkpoint(session.id);
    assert.match(first.id, /^ckp_/);
    assert.deepEqual([first.kind, first.trigger, first.sessionId], ['fs', 'manual', session.id]);
    await api.exec(session.id, 'echo v2 > /workspace/state; echo later > /workspace/later');
    const restored = await api.call('POST', `/v1/sessions/${session.id}/restore`, { checkpointId: first.id });
    assert.equal(restored.status, 200, JSON.stringify(restored.body));
    assert.equal(restored.body.status, 'running');
    assert.equal(await read(session.id, '/workspace/state'), 'v1\n');
    assert.equal((await api.exec(session.id, 'test -e /workspace/later')).exitCode, 1);
    const listed = await api.call('GET', `/v1/sessions/${session.id}/checkpoints`);
    assert.deepEqual(
      listed.body.checkpoints.map((c: { id: string }) => c.id),
      [first.id],
    );
    const detail = await api.call('GET', `/v1/sessions/${session.id}`);
    assert.deepEqual(
      detail.body.checkpoints.map((c: { id: string }) => c.id),
      [first.id],
    );
    assert.equal(detail.body.sandboxHistory.length, 2);
    assert.equal(detail.body.sandboxHistory[0].endReason, 'restored');
    assert.equal(detail.body.sandboxHistory[1].endedAt, null);
  });

  test('a checkpoint taken right after a write holds the whole file', { timeout: 120_000 }, async () => {
    const session = await created();
    const written = await api.exec(session.id, 'head -c 20000000 /dev/urandom > /workspace/blob && sha256sum /workspace/blob');
    const ckp = await checkpoint(session.id);
    const fork = await api.call('POST', `/v1/checkpoints/${ckp.id}/fork`, { count: 1 });
    assert.equal(fork.status, 201, JSON.stringify(fork.body));
    const child = fork.body.sessions[0];
    sessions.push(child.id);
    assert.equal((await api.exec(child.id, 'sha256sum /workspace/blob')).stdout, written.stdout);
  });

  test('fork x4: each fork sees the parent files and diverges on its own', { timeout: 240_000 }, async () => {
    const parent = await created();
    await api.exec(parent.id, 'echo shared > /workspace/base');
    const ckp = await checkpoint(parent.id);
    const fork = await api.call('POST', `/v1/checkpoints/${ckp.id}/fork`, { count: 4 });
    assert.equal(fork.status, 201, JSON.stringify(fork.body));
    const forks = fork.body.sessions as any[];
    sessions.push(...forks.map((f) => f.id));
    assert.equal(forks.length, 4);
    assert.equal(new Set(forks.map((f) => f.id)).size, 4);
    for (const [i, f] of forks.entries()) {
      assert.equal(f.parentCheckpointId, ckp.id);
      assert.equal(await read(f.id, '/workspace/base'), 'shared\n');
      await api.exec(f.id, `echo fork-${i} > /workspace/mine`);
    }
    for (const [i, f] of forks.entries()) assert.equal(await read(f.id, '/workspace/mine'), `fork-${i}\n`);
    assert.equal((await api.exec(parent.id, 'test -e /workspace/mine')).exitCode, 1, "the parent does not see its forks' writes");
  });

  test('keep the winner: restore the parent to a checkpoint taken in a fork', { timeout: 180_000 }, async () => {
    const parent = await created();
    await api.exec(parent.id, 'echo step-n > /workspace/progress');
    const ckp = await checkpoint(parent.id);
    const [a, b] = (await api.call('POST', `/v1/checkpoints/${ckp.id}/fork`, { count: 2 })).body.sessions;
    sessions.push(a.id, b.id);
    await api.exec(a.id, 'echo strategy-a > /workspace/progress');
    await api.exec(b.id, 'echo strategy-b > /workspace/progress');
    const winner = await checkpoint(b.id);
    const restored = await api.call('POST', `/v1/sessions/${parent.id}/restore`, { checkpointId: winner.id });
    assert.equal(restored.status, 200, JSON.stringify(restored.body));
    assert.equal(await read(parent.id, '/workspace/progress'), 'strategy-b\n');
    // Sibling and descendants share the lineage, so a fork may adopt its sibling's work as well.
    assert.equal((await api.call('POST', `/v1/sessions/${a.id}/restore`, { checkpointId: winner.id })).status, 200);
    assert.equal(await read(a.id, '/workspace/progress'), 'strategy-b\n');
  });

  test('checkpoints outside the lineage or of another tenant are refused; deleting a session frees its checkpoints', { timeout: 120_000 }, async () => {
    const one = await created();
    const other = await created();
    const foreign = await checkpoint(other.id);
    const refused = await api.call('POST', `/v1/sessions/${one.id}/restore`, { checkpointId: foreign.id });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, 'CHECKPOINT_NOT_IN_LINEAGE');
    assert.equal((await api.call('POST', `/v1/sessions/${one.id}/restore`, { checkpointId: 'ckp_nothere' })).body.error.code, 'CHECKPOINT_NOT_FOUND');
    assert.equal((await api.call('POST', '/v1/checkpoints/ckp_nothere/fork', { count: 1 })).status, 404);
    assert.equal((await api.call('POST', `/v1/checkpoints/${foreign.id}/fork`, { count: 99 })).body.error.code, 'VALIDATION_FAILED');

    const tenant = await api.call('POST', '/v1/tenants', { name: 'outsider' });
    const outsider = new Api(platform.url, (await api.call('POST', '/v1/keys', { tenantId: tenant.body.id })).body.key);
    assert.equal((await outsider.call('POST', `/v1/checkpoints/${foreign.id}/fork`, { count: 1 })).status, 404);
    assert.equal((await outsider.call('GET', `/v1/sessions/${other.id}/checkpoints`)).status, 404);

    const subvolume = `${platform.dataDir}/btrfs/checkpoints/${foreign.id}`;
    assert.ok(existsSync(subvolume));
    assert.equal((await api.call('DELETE', `/v1/sessions/${other.id}`)).status, 200);
    assert.ok(!existsSync(subvolume), 'the checkpoint subvolume is freed with its session');
  });
});
