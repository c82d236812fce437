import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Space } from '@space/sdk';
import { Api } from './client.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const execFileAsync = promisify(execFile);

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

  test("/tmp, the volume's own bound into the sandbox, is on the disk in a checkpoint taken right after a write", { timeout: 120_000 }, async () => {
    const session = await created();
    const written = await api.exec(
      session.id,
      'head -c 20000000 /dev/urandom > /tmp/blob && mkdir /tmp/many && for i in $(seq 200); do echo $i > /tmp/many/$i; done && sha256sum < /tmp/blob',
    );
    const ckp = await checkpoint(session.id);
    // Read on the host from the checkpoint's snapshot: what the sandbox held in its cache was written out.
    const blob = await api.bytes(`/v1/checkpoints/${ckp.id}/files?path=/tmp/blob`);
    assert.equal(`${createHash('sha256').update(blob.data).digest('hex')}  -\n`, written.stdout);
    const listed = await api.call('GET', `/v1/checkpoints/${ckp.id}/files/list?path=/tmp/many`);
    assert.equal(listed.body.entries.length, 200, JSON.stringify(listed.body).slice(0, 300));
    assert.equal((await api.bytes(`/v1/checkpoints/${ckp.id}/files?path=/tmp/many/200`)).data.toString(), '200\n');
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

  test("a checkpoint's files without a sandbox: read, listed and stat'ed on a real snapshot, links kept inside it, a path's history, other tenants refused", {
    timeout: 180_000,
  }, async () => {
    const session = await created({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    await api.exec(
      session.id,
      'mkdir -p app && echo "mode: good" > app/config.yaml && ln -s /etc/shadow shadow && ln -s ../../../../.. up && ln -s app/config.yaml config',
    );
    const first = await checkpoint(session.id);
    await api.exec(session.id, 'echo "mode: evil" > app/config.yaml');
    const second = await checkpoint(session.id);
    await api.exec(session.id, 'rm app/config.yaml && echo n > new.txt && mv up up2 && chmod 700 app');
    const third = await checkpoint(session.id);
    // From here on the session has no sandbox: its checkpoints are read where they are, and none starts.
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);

    const file = (ckp: string, path: string) => api.bytes(`/v1/checkpoints/${ckp}/files?path=${encodeURIComponent(path)}`);
    assert.equal((await file(first.id, 'app/config.yaml')).data.toString(), 'mode: good\n', 'relative to the working directory');
    assert.equal((await file(second.id, '/workspace/config')).data.toString(), 'mode: evil\n', 'a link inside the checkpoint');
    const shadow = await file(first.id, '/workspace/shadow');
    assert.equal(shadow.status, 404, "the link names the checkpoint's /etc/shadow, which a sandbox has none of, never the host's");
    assert.equal((await file(first.id, '/workspace/up/workspace/app/config.yaml')).data.toString(), 'mode: good\n', '`..` stops at the checkpoint root');
    // (A FIFO a sandbox makes lives in gVisor's memory, never on the volume; one from an image is refused: checkpoint-files.test.ts.)
    assert.equal((await api.call('GET', `/v1/checkpoints/${first.id}/files?path=/workspace/../etc/passwd`)).status, 400);

    const listed = await api.call('GET', `/v1/checkpoints/${first.id}/files/list?path=/workspace`);
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    const made = new Set(['app', 'config', 'shadow', 'up']);
    assert.deepEqual(
      listed.body.entries.filter((e: { name: string }) => made.has(e.name)).map((e: { name: string; type: string }) => `${e.name}:${e.type}`),
      ['app:directory', 'config:symlink', 'shadow:symlink', 'up:symlink'],
    );
    const stat = await api.call('GET', `/v1/checkpoints/${first.id}/files/stat?path=/workspace/shadow`);
    assert.deepEqual([stat.body.type, stat.body.target], ['symlink', '/etc/shadow']);

    const history = await api.call('GET', `/v1/sessions/${session.id}/files/history?path=app/config.yaml`);
    assert.equal(history.status, 200, JSON.stringify(history.body));
    assert.equal(history.body.path, '/workspace/app/config.yaml');
    assert.deepEqual(
      history.body.versions.map((v: { checkpointId: string; change: string; size: number | null }) => [v.checkpointId, v.change, v.size]),
      [
        [first.id, 'added', 11],
        [second.id, 'modified', 11],
        [third.id, 'removed', null],
      ],
    );
    assert.match(history.body.versions[0].sha256, /^[0-9a-f]{64}$/);
    const after = (await api.call('GET', `/v1/sessions/${session.id}`)).body;
    assert.deepEqual([after.status, after.sandboxHistory.length], ['stopped', 1], 'no sandbox was started to read them');

    const tenant = await api.call('POST', '/v1/tenants', { name: 'reader' });
    const outsider = new Api(platform.url, (await api.call('POST', '/v1/keys', { tenantId: tenant.body.id })).body.key);
    assert.equal((await outsider.bytes(`/v1/checkpoints/${first.id}/files?path=/etc/hostname`)).status, 404);
    assert.equal((await outsider.call('GET', `/v1/checkpoints/${first.id}/files/list?path=/`)).status, 404);
    assert.equal((await outsider.call('GET', `/v1/sessions/${session.id}/files/history?path=/etc/hostname`)).status, 404);
    assert.equal((await api.call('GET', '/v1/checkpoints/ckp_nothere/files/stat?path=/')).status, 404);

    // What changed between checkpoints, from btrfs: under /workspace, by path, in pages.
    const diff = async (from: string, to: string, extra = '') => {
      const reply = await api.call('GET', `/v1/checkpoints/${from}/diff?to=${to}${extra}`);
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      return reply.body;
    };
    const ofWorkspace = (page: { entries: { path: string; change: string; from?: string; sizeBefore: number | null; sizeAfter: number | null }[] }) =>
      page.entries.filter((e) => e.path.startsWith('/workspace/')).map((e) => [e.path, e.change, e.from ?? null, e.sizeBefore, e.sizeAfter]);
    assert.deepEqual(ofWorkspace(await diff(first.id, second.id)), [['/workspace/app/config.yaml', 'modified', null, 11, 11]]);
    assert.deepEqual(ofWorkspace(await diff(second.id, third.id)), [
      ['/workspace/app', 'mode', null, 22, 0],
      ['/workspace/app/config.yaml', 'removed', null, 11, null],
      ['/workspace/new.txt', 'added', null, null, 2],
      ['/workspace/up2', 'renamed', '/workspace/up', 14, 14],
    ]);
    const fileDiff = await api.call('GET', `/v1/checkpoints/${first.id}/diff/file?to=${second.id}&path=app/config.yaml`);
    assert.equal(fileDiff.status, 200, JSON.stringify(fileDiff.body));
    assert.deepEqual([fileDiff.body.text, fileDiff.body.sizeBefore, fileDiff.body.sizeAfter], [true, 11, 11]);
    assert.match(
      fileDiff.body.unified,
      /^--- a\/workspace\/app\/config\.yaml\n\+\+\+ b\/workspace\/app\/config\.yaml\n@@ -1 \+1 @@\n-mode: good\n\+mode: evil\n$/,
    );
    const goneDiff = (await api.call('GET', `/v1/checkpoints/${second.id}/diff/file?to=${third.id}&path=app/config.yaml`)).body;
    assert.deepEqual(
      [goneDiff.sizeAfter, goneDiff.sha256After, goneDiff.unified],
      [null, null, '--- a/workspace/app/config.yaml\n+++ b/workspace/app/config.yaml\n@@ -1 +0,0 @@\n-mode: evil\n'],
    );
    const paged: string[] = [];
    let next: string | null = null;
    do {
      const page = await diff(second.id, third.id, `&limit=1${next === null ? '' : `&after=${encodeURIComponent(next)}`}`);
      assert.ok(page.entries.length <= 1);
      paged.push(...page.entries.map((e: { path: string }) => e.path));
      next = page.next;
    } while (next !== null);
    assert.deepEqual(
      paged,
      (await diff(second.id, third.id)).entries.map((e: { path: string }) => e.path),
      'pages of one: the same entries',
    );
    const unrelated = await created({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    const elsewhere = await checkpoint(unrelated.id);
    const refusedDiff = await api.call('GET', `/v1/checkpoints/${first.id}/diff?to=${elsewhere.id}`);
    assert.deepEqual([refusedDiff.status, refusedDiff.body.error.code], [400, 'CHECKPOINT_NOT_IN_LINEAGE']);
    assert.match(refusedDiff.body.error.message, new RegExp(`${first.id}.*${elsewhere.id}`));

    // The same through the SDK.
    const space = new Space({ apiUrl: platform.url, apiKey: platform.adminKey });
    const files = space.checkpoints.files(second.id);
    assert.equal((await files.read('app/config.yaml')).toString(), 'mode: evil\n');
    assert.equal((await files.stat('/workspace/app')).type, 'directory');
    assert.deepEqual(
      (await space.sessions.handle(session.id).files.history('app/config.yaml')).versions.map((v) => v.change),
      ['added', 'modified', 'removed'],
    );
    assert.ok((await space.checkpoints.diff(first.id, second.id)).entries.some((e) => e.path === '/workspace/app/config.yaml' && e.change === 'modified'));

    // And through the CLI.
    const cli = (...args: string[]) =>
      execFileAsync(process.execPath, [cliMain, ...args], { env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: platform.adminKey } });
    assert.equal((await cli('cat', `${second.id}:app/config.yaml`)).stdout, 'mode: evil\n');
    assert.match((await cli('ls', `${first.id}:/workspace`)).stdout, /^symlink .* shadow -> \/etc\/shadow$/m);
    const cliHistory = JSON.parse((await cli('history', session.id, 'app/config.yaml', '--json')).stdout);
    assert.deepEqual(
      cliHistory.versions.map((v: { change: string }) => v.change),
      ['added', 'modified', 'removed'],
    );
    assert.match((await cli('diff', second.id, third.id)).stdout, /^renamed +symlink +\/workspace\/up2 \(from \/workspace\/up\)$/m);
    assert.match((await cli('diff', first.id, second.id, '--path', 'app/config.yaml')).stdout, /^\+mode: evil$/m);
    await assert.rejects(cli('cat', 'app/config.yaml'), (err: { stderr?: string }) => /expected CHECKPOINT:path/.test(err.stderr ?? ''));

    // Against the session's files now: written, not checkpointed, yet listed (an fs checkpoint is taken and named in `to`).
    await api.exec(session.id, 'echo "mode: live" > live.txt && echo n2 > new.txt');
    const live = await diff(third.id, 'live');
    assert.match(live.to, /^ckp_/);
    assert.ok(![first.id, second.id, third.id].includes(live.to), 'a checkpoint taken for the diff');
    assert.deepEqual(ofWorkspace(live), [
      ['/workspace/live.txt', 'added', null, null, 11],
      ['/workspace/new.txt', 'modified', null, 2, 3],
    ]);
    const liveFile = (await api.call('GET', `/v1/checkpoints/${second.id}/diff/file?to=live&path=live.txt`)).body;
    assert.deepEqual([liveFile.sizeBefore, liveFile.unified], [null, '--- a/workspace/live.txt\n+++ b/workspace/live.txt\n@@ -0,0 +1 @@\n+mode: live\n']);
    assert.equal((await api.call('GET', `/v1/checkpoints/${third.id}/diff?to=yesterday`)).status, 400);
    assert.match((await cli('diff', third.id, 'live')).stdout, /^added +file +\/workspace\/live\.txt/m);
  });

  test('a path put back from a checkpoint into the running session: a file, a directory with its links and modes, elsewhere; undoable; refusals', {
    timeout: 180_000,
  }, async () => {
    const session = await created({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    await api.exec(session.id, 'mkdir -p app/sub && echo secret > app/a.txt && chmod 600 app/a.txt && echo b > app/sub/b.txt && ln -s a.txt app/link');
    // A process that holds the file open and keeps running through the restores.
    const holder = await api.exec(session.id, ['sh', '-c', 'exec 3<app/a.txt; sleep 600'], { background: true });
    const good = await checkpoint(session.id);
    await api.exec(session.id, 'echo broken > app/a.txt && rm -r app/sub app/link');

    const restore = (body: Record<string, unknown>) => api.call('POST', `/v1/sessions/${session.id}/files/restore`, body);
    const file = await restore({ checkpointId: good.id, path: 'app/a.txt' });
    assert.equal(file.status, 200, JSON.stringify(file.body));
    assert.deepEqual([file.body.path, file.body.files, file.body.directories], ['/workspace/app/a.txt', 1, 0]);
    assert.equal(await read(session.id, '/workspace/app/a.txt'), 'secret\n');
    assert.equal((await api.exec(session.id, 'stat -c %a app/a.txt')).stdout, '600\n', 'its mode as it was');
    const undo = await api.bytes(`/v1/checkpoints/${file.body.undoCheckpointId}/files?path=app/a.txt`);
    assert.equal(undo.data.toString(), 'broken\n', 'the checkpoint taken first holds what the restore replaced');

    const tree = await restore({ checkpointId: good.id, path: 'app' });
    assert.equal(tree.status, 200, JSON.stringify(tree.body));
    assert.deepEqual([tree.body.files, tree.body.directories, tree.body.symlinks], [2, 2, 1]);
    assert.equal(await read(session.id, '/workspace/app/sub/b.txt'), 'b\n');
    assert.equal((await api.exec(session.id, 'readlink app/link')).stdout, 'a.txt\n');
    const elsewhere = await restore({ checkpointId: good.id, path: 'app/sub', to: '/tmp/sub-copy' });
    assert.equal(elsewhere.status, 200, JSON.stringify(elsewhere.body));
    assert.equal(await read(session.id, '/tmp/sub-copy/b.txt'), 'b\n');
    const processes = (await api.call('GET', `/v1/sessions/${session.id}/processes`)).body.processes as { pid: number }[];
    assert.ok(
      processes.some((p) => p.pid === holder.pid),
      'the process holding the file still runs',
    );

    const refused = async (body: Record<string, unknown>, status: number, code: string, message: RegExp) => {
      const reply = await restore(body);
      assert.deepEqual([reply.status, reply.body.error?.code], [status, code], JSON.stringify(reply.body));
      assert.match(reply.body.error.message, message);
    };
    await refused({ checkpointId: good.id, path: 'app/a.txt', to: '/proc/self/x' }, 400, 'VALIDATION_FAILED', /\/proc/);
    await refused({ checkpointId: good.id, path: 'nothing-here' }, 404, 'FILE_NOT_FOUND', /nothing-here/);
    await refused({ checkpointId: good.id, path: '../etc/passwd' }, 400, 'INVALID_PATH', /\.\./);
    const other = await created({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    await refused({ checkpointId: (await checkpoint(other.id)).id, path: 'app' }, 400, 'CHECKPOINT_NOT_IN_LINEAGE', /not related/);

    // The SDK and the CLI.
    await api.exec(session.id, 'echo broken > app/a.txt');
    const space = new Space({ apiUrl: platform.url, apiKey: platform.adminKey });
    assert.equal((await space.sessions.handle(session.id).files.restore(good.id, 'app/a.txt')).files, 1);
    assert.equal(await read(session.id, '/workspace/app/a.txt'), 'secret\n');
    await api.exec(session.id, 'rm app/sub/b.txt');
    const cli = await execFileAsync(process.execPath, [cliMain, 'restore', session.id, good.id, '--path', 'app/sub', '--json'], {
      env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: platform.adminKey },
    });
    assert.equal(JSON.parse(cli.stdout).files, 1);
    assert.equal(await read(session.id, '/workspace/app/sub/b.txt'), 'b\n');
  });
});
