import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { describe, test } from 'node:test';
import type { Api, ApiReply } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** "status CODE" of each reply, counted: what a client saw, in one line for an assertion message. */
function tally(replies: ApiReply[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of replies) {
    const key = `${r.status} ${r.body?.error?.code ?? 'ok'}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** Fails unless every reply is one of `allowed` ("200 ok", "404 SESSION_NOT_FOUND", ...). */
function onlyAllowed(what: string, replies: ApiReply[], allowed: string[]): void {
  const counts = tally(replies);
  for (const key of Object.keys(counts)) assert.ok(allowed.includes(key), `${what}: unexpected ${key} in ${JSON.stringify(counts)}`);
}

/**
 * Lifecycle operations on one session are serialised: concurrent restores, deletes, forks and the
 * calls around them each get a clean answer, and nothing is left half-done on the node.
 */
describe('concurrent lifecycle operations on one session', () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];

  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)));

  const volumes = (): string[] => readdirSync(`${platform.dataDir}/btrfs/volumes`);

  test('six restores at once, with execs among them: each restore runs in turn, no call fails with 500, no leftover', { timeout: 180_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(session.id);
    await api.exec(session.id, 'echo one > /workspace/f');
    const first = (await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, {})).body;
    await api.exec(session.id, 'echo two > /workspace/f');
    const second = (await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, {})).body;

    const restores = Array.from({ length: 6 }, (_, i) =>
      api.call('POST', `/v1/sessions/${session.id}/restore`, { checkpointId: i % 2 ? second.id : first.id }),
    );
    const execs: Promise<ApiReply>[] = [];
    for (let i = 0; i < 20; i++) {
      execs.push(api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: 'cat /workspace/f' }));
      await sleep(50);
    }
    const restoreReplies = await Promise.all(restores);
    const execReplies = await Promise.all(execs);
    onlyAllowed('restores', restoreReplies, ['200 ok', '409 SESSION_BUSY']);
    assert.ok(restoreReplies.filter((r) => r.status === 200).length >= 1, JSON.stringify(tally(restoreReplies)));
    // An exec arriving during a restore waits for it; one already running when a restore stops its sandbox is told so.
    onlyAllowed('execs', execReplies, ['200 ok', '409 SANDBOX_STOPPED']);
    for (const r of execReplies.filter((r) => r.status === 200)) assert.match(r.body.stdout, /^(one|two)\n$/);

    // Nothing of a restore stays behind: no staging copy, no snapshot inside the session's root.
    assert.deepEqual(
      volumes().filter((v) => v.startsWith(session.id)),
      [session.id],
    );
    assert.doesNotMatch((await api.exec(session.id, 'ls /')).stdout, /ckp_/);
    const after = (await api.call('GET', `/v1/sessions/${session.id}`)).body;
    assert.equal(after.status, 'running');
    assert.ok(after.sandboxHistory.filter((h: { endReason: string | null }) => h.endReason === null).length === 1, 'exactly one sandbox serves the session');
    const deleted = await api.call('DELETE', `/v1/sessions/${session.id}`);
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    assert.equal(existsSync(`${platform.dataDir}/btrfs/volumes/${session.id}`), false);
  });

  test('ten deletes at once, with execs around them: one delete succeeds, every other call gets 404, nothing boots again', { timeout: 120_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, idleTimeoutSec: 0 });
    await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, {});
    const before = execsOf(api, session.id, 10, 'sleep 0.3; echo hi');
    await sleep(100);
    const deletes = await Promise.all(Array.from({ length: 10 }, () => api.call('DELETE', `/v1/sessions/${session.id}`)));
    const later = await Promise.all(execsOf(api, session.id, 10, 'echo late'));
    onlyAllowed('deletes', deletes, ['200 ok', '404 SESSION_NOT_FOUND']);
    assert.equal(deletes.filter((r) => r.status === 200).length, 1, JSON.stringify(tally(deletes)));
    onlyAllowed('execs during the deletes', await Promise.all(before), ['200 ok', '404 SESSION_NOT_FOUND']);
    onlyAllowed('execs after the deletes', later, ['404 SESSION_NOT_FOUND']);
    await sleep(500);
    assert.deepEqual(
      volumes().filter((v) => v.startsWith(session.id)),
      [],
      'no volume was made again for the deleted session',
    );
    assert.equal(
      (await api.call('GET', '/v1/sessions')).body.sessions.some((s: { id: string }) => s.id === session.id),
      false,
    );
  });

  test('forks racing a delete of their parent: each fork is whole or refused cleanly, and a refused one leaves no volume', { timeout: 120_000 }, async () => {
    const parent = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, idleTimeoutSec: 0 });
    await api.exec(parent.id, 'echo parent > /workspace/f');
    const checkpoint = (await api.call('POST', `/v1/sessions/${parent.id}/checkpoints`, {})).body;
    const volumesBefore = new Set(volumes());
    const forks = [1, 2, 3].map(() => api.call('POST', `/v1/checkpoints/${checkpoint.id}/fork`, { count: 2 }));
    await sleep(30);
    const deleted = await api.call('DELETE', `/v1/sessions/${parent.id}`);
    assert.equal(deleted.status, 200);
    const replies = await Promise.all(forks);
    onlyAllowed('forks', replies, ['201 ok', '404 CHECKPOINT_NOT_FOUND', '404 SESSION_NOT_FOUND']);
    const made = replies.filter((r) => r.status === 201).flatMap((r) => r.body.sessions.map((s: { id: string }) => s.id) as string[]);
    sessions.push(...made);
    for (const id of made) assert.equal((await api.exec(id, 'cat /workspace/f')).stdout, 'parent\n');
    const added = volumes().filter((v) => !volumesBefore.has(v));
    assert.deepEqual(added.sort(), [...made].sort(), 'the only new volumes are those of the forks that were made');
  });
});

function execsOf(api: Api, id: string, count: number, cmd: string): Promise<ApiReply>[] {
  return Array.from({ length: count }, () => api.call('POST', `/v1/sessions/${id}/exec`, { cmd }));
}
