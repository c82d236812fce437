import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { after, describe, test } from 'node:test';
import { Api } from './client.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

/** Sessions that do nothing on their own: no automatic checkpoints, never stopped for idleness. */
const quiet = { template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 };

/** Tenants' volumes on real btrfs subvolumes with quotas, bound into real gVisor sandboxes. */
describe('volumes', () => {
  let platform: RunningPlatform;
  let admin: Api;
  /** Every session made, with the key of its tenant (the admin key cannot delete another tenant's). */
  const made: { api: Api; id: string }[] = [];

  // Registered first: runs before the platform stops.
  after(async () => {
    for (const { api, id } of made) await api.call('DELETE', `/v1/sessions/${id}`);
  });
  platformForSuite([], (p, a) => ((platform = p), (admin = a)));

  async function newTenant(name: string): Promise<Api> {
    const { id } = (await admin.call('POST', '/v1/tenants', { name })).body;
    return new Api(platform.url, (await admin.call('POST', '/v1/keys', { tenantId: id })).body.key);
  }

  async function session(api: Api, volumes: { name: string; path: string; readOnly?: boolean }[]): Promise<string> {
    const created = await api.createSession({ ...quiet, volumes });
    made.push({ api, id: created.id });
    return created.id;
  }

  async function sh(api: Api, id: string, script: string): Promise<{ stdout: string; stderr: string; exitCode: number }> {
    return api.exec(id, ['sh', '-c', script]);
  }

  const namedVolumes = (): string[] =>
    existsSync(`${platform.dataDir}/btrfs/named-volumes`) ? readdirSync(`${platform.dataDir}/btrfs/named-volumes`).sort() : [];

  test('a volume outlives its sessions: one writer at a time, readers, a quota, snapshots, tenants apart', { timeout: 240_000 }, async () => {
    const a = await newTenant('volume-owner');
    const onDiskBefore = namedVolumes();

    // Bad input: names and mount paths that could point elsewhere, sizes out of range.
    for (const body of [{ name: '../etc' }, { name: 'Data' }, { name: 'ok', sizeGb: 0 }, { name: 'ok', sizeGb: 'big' }]) {
      const refused = await a.call('POST', '/v1/volumes', body);
      assert.deepEqual([refused.status, refused.body.error.code], [400, 'VALIDATION_FAILED'], JSON.stringify(body));
    }
    const created = await a.call('POST', '/v1/volumes', { name: 'data', sizeGb: 0.25 });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual([created.body.name, created.body.sizeGb, created.body.mounts], ['data', 0.25, []]);
    assert.equal((await a.call('POST', '/v1/volumes', { name: 'data' })).body.error.code, 'VOLUME_EXISTS');
    for (const path of ['/proc/x', '/data/../etc', '/', 'relative', '/tmp', '/dev/shm', '/.space']) {
      const refused = await a.call('POST', '/v1/sessions', { ...quiet, volumes: [{ name: 'data', path }] });
      assert.equal(refused.status, 400, path);
      assert.match(refused.body.error.code, /^(VALIDATION_FAILED|INVALID_PATH)$/, path);
    }
    const twice = await a.call('POST', '/v1/sessions', {
      ...quiet,
      volumes: [
        { name: 'data', path: '/a' },
        { name: 'data', path: '/b', readOnly: true },
      ],
    });
    assert.equal(twice.status, 400, 'a volume is mounted once per session');
    assert.equal((await a.call('POST', '/v1/sessions', { ...quiet, volumes: [{ name: 'nope', path: '/n' }] })).body.error.code, 'VOLUME_NOT_FOUND');

    // One writer; a second read-write mount is refused and leaves no session behind.
    const writer = await session(a, [{ name: 'data', path: '/mnt/data' }]);
    assert.equal((await sh(a, writer, 'echo hello > /mnt/data/greeting && cat /mnt/data/greeting')).stdout, 'hello\n');
    const sessionsBefore = (await a.call('GET', '/v1/sessions')).body.sessions.length;
    const busy = await a.call('POST', '/v1/sessions', { ...quiet, volumes: [{ name: 'data', path: '/data' }] });
    assert.deepEqual([busy.status, busy.body.error.code], [409, 'VOLUME_BUSY']);
    assert.match(busy.body.error.message, new RegExp(writer));
    assert.equal((await a.call('GET', '/v1/sessions')).body.sessions.length, sessionsBefore, 'the refused session is not kept');

    // Readers mount it read-only, as many as want to.
    const reader = await session(a, [{ name: 'data', path: '/data', readOnly: true }]);
    assert.equal((await sh(a, reader, 'cat /data/greeting')).stdout, 'hello\n');
    // ...and see the writer's writes at once, files they looked for before included: the sandboxes of
    // both ask the host again (neither trusts a cache of its own).
    assert.equal((await sh(a, reader, 'ls /data/new; wc -c < /data/greeting')).stdout, '6\n');
    await sh(a, writer, 'echo again >> /mnt/data/greeting && echo new > /mnt/data/new');
    assert.equal((await sh(a, reader, 'cat /data/greeting /data/new')).stdout, 'hello\nagain\nnew\n');
    const readOnlyWrite = await sh(a, reader, 'echo x > /data/other');
    assert.notEqual(readOnlyWrite.exitCode, 0);
    assert.match(readOnlyWrite.stderr, /Read-only file system/);
    const listed = (await a.call('GET', '/v1/volumes')).body.volumes;
    assert.deepEqual(
      listed[0].mounts.map((m: { sessionId: string; readOnly: boolean }) => [m.sessionId, m.readOnly]).sort(),
      [
        [reader, true],
        [writer, false],
      ].sort(),
    );
    assert.deepEqual(
      (await a.call('GET', `/v1/sessions/${reader}`)).body.volumes,
      [{ name: 'data', path: '/data', readOnly: true }],
      'the session shows its volumes',
    );

    // The quota: the writer gets "Disk quota exceeded"; its own disk and the host keep their space.
    const filled = await sh(a, writer, 'dd if=/dev/urandom of=/mnt/data/fill bs=1M count=300 2>&1; sync');
    assert.match(filled.stdout, /Disk quota exceeded|No space left/, filled.stdout);
    assert.equal((await sh(a, writer, 'echo fine > /root/own-disk && cat /root/own-disk')).stdout, 'fine\n');
    const used = (await a.call('GET', '/v1/volumes/data')).body.usedBytes;
    assert.ok(used > 200 * 1024 ** 2 && used <= 0.25 * 1024 ** 3 + 16 * 1024 ** 2, `the volume holds ${used} bytes`);
    await sh(a, writer, 'rm /mnt/data/fill');

    // In use: not deleted. Another tenant sees none of it.
    assert.equal((await a.call('DELETE', '/v1/volumes/data')).body.error.code, 'VOLUME_IN_USE');
    const b = await newTenant('volume-stranger');
    assert.deepEqual((await b.call('GET', '/v1/volumes')).body.volumes, []);
    assert.equal((await b.call('GET', '/v1/volumes/data')).status, 404);
    assert.equal((await b.call('POST', '/v1/sessions', { ...quiet, volumes: [{ name: 'data', path: '/d' }] })).body.error.code, 'VOLUME_NOT_FOUND');
    assert.equal((await b.call('DELETE', '/v1/volumes/data')).status, 404);
    assert.equal((await b.call('POST', '/v1/volumes/data/snapshots')).status, 404);

    // A snapshot holds what the running writer wrote (its writes flushed first); a new volume starts from it.
    await sh(a, writer, 'echo before-snapshot > /mnt/data/greeting');
    const snapshot = await a.call('POST', '/v1/volumes/data/snapshots');
    assert.equal(snapshot.status, 201, JSON.stringify(snapshot.body));
    await sh(a, writer, 'echo after-snapshot > /mnt/data/greeting');
    assert.equal((await a.call('POST', '/v1/volumes', { name: 'copy', fromSnapshot: 'vsn_000000000000' })).body.error.code, 'VOLUME_NOT_FOUND');
    assert.equal((await b.call('POST', '/v1/volumes', { name: 'stolen', fromSnapshot: snapshot.body.id })).body.error.code, 'VOLUME_NOT_FOUND');
    assert.equal((await a.call('POST', '/v1/volumes', { name: 'copy', fromSnapshot: snapshot.body.id, sizeGb: 1 })).status, 201);
    const copyReader = await session(a, [{ name: 'copy', path: '/copy' }]);
    assert.equal((await sh(a, copyReader, 'cat /copy/greeting')).stdout, 'before-snapshot\n');
    assert.deepEqual(
      (await a.call('GET', '/v1/volumes/data/snapshots')).body.snapshots.map((s: { id: string }) => s.id),
      [snapshot.body.id],
    );

    // The sessions go; the volume and its files stay for the next one.
    for (const id of [writer, reader, copyReader]) assert.equal((await a.call('DELETE', `/v1/sessions/${id}`)).status, 200);
    const next = await session(a, [{ name: 'data', path: '/data' }]);
    assert.equal((await sh(a, next, 'cat /data/greeting')).stdout, 'after-snapshot\n');
    assert.equal((await a.call('DELETE', `/v1/sessions/${next}`)).status, 200);

    // Deleted with their snapshots: nothing left on the node.
    assert.equal((await a.call('DELETE', `/v1/volumes/data/snapshots/${snapshot.body.id}`)).status, 200);
    assert.equal((await a.call('GET', '/v1/volumes/data/snapshots')).body.snapshots.length, 0);
    for (const name of ['data', 'copy']) assert.equal((await a.call('DELETE', `/v1/volumes/${name}`)).status, 200);
    assert.deepEqual((await a.call('GET', '/v1/volumes')).body.volumes, []);
    assert.deepEqual(namedVolumes(), onDiskBefore);
  });

  test('the CLI: volume create, ls, snapshot, rm; create --volume; restore --volumes', { timeout: 120_000 }, async () => {
    const a = await newTenant('volume-cli');
    const space = async (...args: string[]) =>
      JSON.parse(
        (
          await promisify(execFile)(process.execPath, [cliMain, ...args, '--json'], {
            env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: a.key! },
          })
        ).stdout,
      );
    assert.equal((await space('volume', 'create', 'cache', '--size', '0.5')).sizeGb, 0.5);
    const session = await space(
      'create',
      '-t',
      'tiny',
      '--volume',
      'cache:/cache',
      '--checkpoint-interval',
      '0',
      '--full-checkpoint-interval',
      '0',
      '--idle-timeout',
      '0',
    );
    made.push({ api: a, id: session.id });
    assert.deepEqual(session.volumes, [{ name: 'cache', path: '/cache', readOnly: false }]);
    await sh(a, session.id, 'echo one > /cache/x');
    const checkpoint = await space('checkpoint', session.id);
    await sh(a, session.id, 'echo two > /cache/x');
    await space('restore', session.id, checkpoint.id, '--volumes');
    assert.equal((await sh(a, session.id, 'cat /cache/x')).stdout, 'one\n');
    const [listed] = await space('volume', 'ls');
    assert.deepEqual([listed.name, listed.mounts[0].sessionId], ['cache', session.id]);
    const snapshot = await space('volume', 'snapshot', 'cache');
    assert.deepEqual(
      (await space('volume', 'snapshots', 'cache')).map((s: { id: string }) => s.id),
      [snapshot.id],
    );
    await space('rm', session.id);
    assert.deepEqual(await space('volume', 'rm', 'cache'), { deleted: 'cache' });
  });

  test('checkpoints copy read-write volumes: forks get their own copies, restores put them back when asked', { timeout: 300_000 }, async () => {
    const a = await newTenant('volume-forker');
    assert.equal((await a.call('POST', '/v1/volumes', { name: 'work', sizeGb: 1 })).status, 201);
    assert.equal((await a.call('POST', '/v1/volumes', { name: 'ref', sizeGb: 1 })).status, 201);
    const filler = await session(a, [{ name: 'ref', path: '/ref' }]);
    await sh(a, filler, 'echo reference > /ref/data');
    await a.call('DELETE', `/v1/sessions/${filler}`);

    const parent = await session(a, [
      { name: 'work', path: '/work' },
      { name: 'ref', path: '/ref', readOnly: true },
    ]);
    await sh(a, parent, 'echo v1 > /work/state; echo v1 > /root/state');
    const c1 = (await a.call('POST', `/v1/sessions/${parent}/checkpoints`, { kind: 'fs' })).body;
    assert.deepEqual(c1.volumes, [
      { name: 'work', path: '/work', readOnly: false, copied: true },
      { name: 'ref', path: '/ref', readOnly: true, copied: false },
    ]);
    await sh(a, parent, 'echo v2 > /work/state; echo v2 > /root/state');

    // Each fork gets its own copy of the read-write volume as it was at the checkpoint.
    const forked = await a.call('POST', `/v1/checkpoints/${c1.id}/fork`, { count: 2 });
    assert.equal(forked.status, 201, JSON.stringify(forked.body));
    const [f1, f2] = forked.body.sessions.map((s: { id: string }) => s.id) as [string, string];
    for (const id of [f1, f2]) made.push({ api: a, id });
    const copyNames = forked.body.sessions.map((s: { volumes: { name: string }[] }) => s.volumes[0]!.name);
    assert.deepEqual(copyNames, [`work-${f1.slice(4, 12)}`, `work-${f2.slice(4, 12)}`]);
    assert.equal((await sh(a, f1, 'cat /work/state /ref/data')).stdout, 'v1\nreference\n');
    await sh(a, f1, 'echo f1 > /work/state');
    assert.equal((await sh(a, f2, 'cat /work/state')).stdout, 'v1\n', 'the forks do not share a copy');
    assert.equal((await sh(a, parent, 'cat /work/state')).stdout, 'v2\n', 'nor do they write the original');
    const owned = (await a.call('GET', '/v1/volumes')).body.volumes.filter((v: { ownerSessionId: string | null }) => v.ownerSessionId);
    assert.deepEqual(owned.map((v: { ownerSessionId: string }) => v.ownerSessionId).sort(), [f1, f2].sort());

    // A restore leaves volumes alone unless asked.
    await a.call('POST', `/v1/sessions/${parent}/restore`, { checkpointId: c1.id });
    assert.equal((await sh(a, parent, 'cat /root/state /work/state')).stdout, 'v1\nv2\n');
    await a.call('POST', `/v1/sessions/${parent}/restore`, { checkpointId: c1.id, restoreVolumes: true });
    assert.equal((await sh(a, parent, 'cat /root/state /work/state')).stdout, 'v1\nv1\n');

    // Keep the winner: the parent takes a fork's checkpoint, its copy of the volume included (matched by mount path).
    const c2 = (await a.call('POST', `/v1/sessions/${f1}/checkpoints`, { kind: 'fs' })).body;
    const kept = await a.call('POST', `/v1/sessions/${parent}/restore`, { checkpointId: c2.id, restoreVolumes: true });
    assert.equal(kept.status, 200, JSON.stringify(kept.body));
    assert.equal((await sh(a, parent, 'cat /work/state')).stdout, 'f1\n');

    // Processes continue over a volume: a full checkpoint, the sandbox killed, the session resumed from memory.
    await a.exec(parent, ['sh', '-c', 'while true; do sleep 1; done'], { background: true });
    const full = await a.call('POST', `/v1/sessions/${parent}/checkpoints`, { kind: 'full' });
    assert.equal(full.status, 201, JSON.stringify(full.body));
    await a.call('POST', `/v1/sessions/${parent}/sandbox/kill`);
    assert.equal((await sh(a, parent, 'cat /work/state /ref/data')).stdout, 'f1\nreference\n');
    const history = (await a.call('GET', `/v1/sessions/${parent}`)).body.sandboxHistory;
    assert.equal(history.at(-1).restoredFrom, full.body.id, JSON.stringify(history.at(-1)));
    // And in a fork of it, whose copy of the volume is another directory on the host.
    const fromFull = (await a.call('POST', `/v1/checkpoints/${full.body.id}/fork`, {})).body.sessions[0];
    made.push({ api: a, id: fromFull.id });
    assert.equal((await sh(a, fromFull.id, 'cat /work/state; ps | grep -c "sleep 1"')).stdout.split('\n')[0], 'f1');
    const forkHistory = (await a.call('GET', `/v1/sessions/${fromFull.id}`)).body.sandboxHistory;
    assert.equal(forkHistory[0].restoredFrom, full.body.id, JSON.stringify(forkHistory[0]));
    assert.equal((await a.call('DELETE', `/v1/sessions/${fromFull.id}`)).status, 200);

    // A fork's copies go with it; the tenant's own volumes stay until deleted, refused while mounted.
    for (const id of [f1, f2]) assert.equal((await a.call('DELETE', `/v1/sessions/${id}`)).status, 200);
    assert.deepEqual(
      (await a.call('GET', '/v1/volumes')).body.volumes.map((v: { name: string }) => v.name),
      ['ref', 'work'],
    );
    assert.equal((await a.call('DELETE', '/v1/volumes/work')).body.error.code, 'VOLUME_IN_USE');
    assert.equal((await a.call('DELETE', `/v1/sessions/${parent}`)).status, 200);
    for (const name of ['work', 'ref']) assert.equal((await a.call('DELETE', `/v1/volumes/${name}`)).status, 200);
  });
});
