import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api } from './client.js';
import { hostResources } from './host-state.js';
import { startPlatform, type RunningPlatform } from './platform.js';

describe('sessions end to end (base template, real gVisor)', () => {
  let platform: RunningPlatform;
  let api: Api;
  const created: string[] = [];

  before(async () => {
    platform = await startPlatform();
    api = new Api(platform.url, platform.adminKey);
  });

  after(async () => {
    for (const id of created) await api.call('DELETE', `/v1/sessions/${id}`).catch(() => undefined);
    const code = await platform.stop();
    assert.equal(code, 0, platform.output());
    const left = hostResources(platform.dataDir);
    assert.deepEqual(left.runsc, [], 'runsc processes left behind');
    assert.deepEqual(left.mounts, [], 'mounts left behind');
    assert.deepEqual(left.loops, [], 'loop devices left behind');
    assert.deepEqual(left.staged, [], 'staged memory images left behind');
  });

  test('create, python and node, write/read/list a file, delete: nothing left behind', { timeout: 60_000 }, async () => {
    const netnsBefore = new Set(hostResources(platform.dataDir).netns);
    const session = await api.createSession({ template: 'base' });
    assert.match(session.id, /^ses_/);
    assert.equal(session.status, 'running');
    assert.ok(session.sandbox?.id);

    const py = await api.exec(session.id, `python3 -c 'print(6*7)'`);
    assert.deepEqual([py.exitCode, py.stdout, py.stderr], [0, '42\n', '']);
    const node = await api.exec(session.id, ['node', '-e', 'console.log([1,2,3].map((x) => x * 2).join(","))']);
    assert.equal(node.stdout, '2,4,6\n');
    // GNU coreutils 9 call statx with a flag this gVisor rejects; space-compat.so drops it.
    const coreutils = await api.exec(session.id, 'ls -d /etc && stat -c %F /tmp && cp -a /etc/hostname /tmp/h && echo copied');
    assert.deepEqual([coreutils.exitCode, coreutils.stdout, coreutils.stderr], [0, '/etc\ndirectory\ncopied\n', '']);

    const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 256));
    const put = await api.call('PUT', `/v1/sessions/${session.id}/files?path=out/data.bin`, undefined, { raw: bytes });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.size, 4096);
    const got = await api.bytes(`/v1/sessions/${session.id}/files?path=/workspace/out/data.bin`);
    assert.equal(got.status, 200);
    assert.ok(got.data.equals(bytes));
    const list = await api.call('GET', `/v1/sessions/${session.id}/files/list?path=out`);
    assert.deepEqual(
      list.body.entries.map((e: { name: string; size: number }) => [e.name, e.size]),
      [['data.bin', 4096]],
    );
    const seen = await api.exec(session.id, 'sha256sum /workspace/out/data.bin | cut -c1-16');
    assert.equal(seen.stdout.length, 17);

    const fetched = await api.call('GET', `/v1/sessions/${session.id}`);
    assert.equal(fetched.body.id, session.id);
    assert.ok((await api.call('GET', '/v1/sessions')).body.sessions.some((s: { id: string }) => s.id === session.id));

    assert.equal((await api.call('DELETE', `/v1/sessions/${session.id}`)).status, 200);
    assert.equal((await api.call('GET', `/v1/sessions/${session.id}`)).status, 404);
    const after = hostResources(platform.dataDir);
    assert.deepEqual(after.runsc, []);
    assert.deepEqual(
      after.netns.filter((n) => !netnsBefore.has(n)),
      [],
    );
  });

  test('exec: exit codes, stderr, stdin, env, cwd, timeout', { timeout: 60_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', env: { GREETING: 'hello' } });
    created.push(session.id);
    const fail = await api.exec(session.id, 'echo oops >&2; exit 3');
    assert.deepEqual([fail.exitCode, fail.stderr], [3, 'oops\n']);
    assert.equal((await api.exec(session.id, 'cat', { stdin: 'piped' })).stdout, 'piped');
    assert.equal((await api.exec(session.id, 'echo $GREETING $EXTRA', { env: { EXTRA: 'world' } })).stdout, 'hello world\n');
    assert.equal((await api.exec(session.id, 'pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
    const slow = await api.exec(session.id, 'sleep 30', { timeoutMs: 300 });
    assert.equal(slow.timedOut, true);
    assert.equal(slow.exitCode, 124);
    const missing = await api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: ['/no/such/binary'] });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.error.code, 'EXEC_FAILED');
    // A server started with `&` keeps the exec's output pipes: the exec still answers at the shell's
    // exit (within its timeout it used to wait, then kill the server), and the server runs on.
    const started = Date.now();
    const server = await api.exec(session.id, 'sleep 300 & echo $!', { timeoutMs: 20_000 });
    assert.ok(Date.now() - started < 5000, `the exec answered after ${Date.now() - started} ms`);
    assert.deepEqual([server.exitCode, server.timedOut], [0, false]);
    assert.equal((await api.exec(session.id, `kill -0 ${server.stdout.trim()} && echo running`)).stdout, 'running\n');
  });

  test('a call retried with its Idempotency-Key runs once and answers the first outcome', { timeout: 60_000 }, async () => {
    const session = await api.createSession({ template: 'tiny' });
    created.push(session.id);
    const execPath = `/v1/sessions/${session.id}/exec`;
    // Keys of this run only: the platform's database outlives it.
    const run = session.id;
    const keyed = (key: string, cmd: string) => api.call('POST', execPath, { cmd }, { headers: { 'idempotency-key': `${run}-${key}` } });

    const first = await keyed('append-1', 'echo one >> /tmp/log; date +%s%N');
    const again = await keyed('append-1', 'echo one >> /tmp/log; date +%s%N');
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    assert.deepEqual([again.status, again.body, again.headers.get('idempotent-replayed')], [200, first.body, 'true']);

    // A retry while the first call still runs is told to wait, and then gets its outcome.
    const slow = keyed('append-2', 'sleep 2; echo two >> /tmp/log');
    await new Promise((resolve) => setTimeout(resolve, 700));
    const early = await keyed('append-2', 'sleep 2; echo two >> /tmp/log');
    assert.equal(early.status, 409, JSON.stringify(early.body));
    assert.equal(early.body.error.code, 'IDEMPOTENCY_IN_PROGRESS');
    assert.equal(early.headers.get('retry-after'), '1');
    assert.equal((await slow).status, 200);
    assert.equal((await keyed('append-2', 'sleep 2; echo two >> /tmp/log')).headers.get('idempotent-replayed'), 'true');
    assert.equal((await api.exec(session.id, 'cat /tmp/log')).stdout, 'one\ntwo\n');

    // A key names one call: used for another operation it is refused; a malformed one too.
    const reused = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, {}, { headers: { 'idempotency-key': `${run}-append-1` } });
    assert.deepEqual([reused.status, reused.body.error.code], [422, 'IDEMPOTENCY_KEY_REUSED']);
    const malformed = await keyed('has spaces', 'true');
    assert.deepEqual([malformed.status, malformed.body.error.code], [400, 'VALIDATION_FAILED']);
    // A refused call is kept too: its retry is refused the same way without running.
    const refused = await api.call('POST', '/v1/sessions/ses_missing/exec', { cmd: 'true' }, { headers: { 'idempotency-key': `${run}-missing-1` } });
    const refusedAgain = await api.call('POST', '/v1/sessions/ses_missing/exec', { cmd: 'true' }, { headers: { 'idempotency-key': `${run}-missing-1` } });
    assert.deepEqual([refusedAgain.status, refusedAgain.body, refusedAgain.headers.get('idempotent-replayed')], [refused.status, refused.body, 'true']);
  });

  test('bad input gets a clear 4xx with a stable code', { timeout: 60_000 }, async () => {
    const session = await api.createSession({ template: 'tiny' });
    created.push(session.id);
    const cases: [string, Promise<{ status: number; body: any }>, number, string][] = [
      ['unknown template', api.call('POST', '/v1/sessions', { template: 'nope' }), 400, 'UNKNOWN_TEMPLATE'],
      [
        'malformed JSON',
        api.call('POST', '/v1/sessions', undefined, { raw: '{"template": ', headers: { 'content-type': 'application/json' } }),
        400,
        'INVALID_JSON',
      ],
      ['wrong types', api.call('POST', '/v1/sessions', { template: 42 }), 400, 'VALIDATION_FAILED'],
      ['unknown field', api.call('POST', '/v1/sessions', { template: 'tiny', colour: 'blue' }), 400, 'VALIDATION_FAILED'],
      [
        'oversize body',
        api.call('POST', `/v1/sessions/${session.id}/exec`, undefined, { raw: JSON.stringify({ cmd: 'x'.repeat(2 * 1024 * 1024) }) }),
        413,
        'PAYLOAD_TOO_LARGE',
      ],
      ['exec without cmd', api.call('POST', `/v1/sessions/${session.id}/exec`, {}), 400, 'VALIDATION_FAILED'],
      ['missing key', new Api(platform.url, null).call('GET', '/v1/sessions'), 401, 'UNAUTHORIZED'],
      ['wrong key', new Api(platform.url, 'sk_wrong').call('GET', '/v1/sessions'), 401, 'UNAUTHORIZED'],
      ['traversal', api.call('GET', `/v1/sessions/${session.id}/files?path=../../etc/passwd`), 400, 'INVALID_PATH'],
      ['traversal in cwd', api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: 'pwd', cwd: '/tmp/../..' }), 400, 'INVALID_PATH'],
      ['unknown session', api.call('GET', '/v1/sessions/ses_doesnotexist'), 404, 'SESSION_NOT_FOUND'],
      ['missing file', api.call('GET', `/v1/sessions/${session.id}/files?path=/nope`), 404, 'FILE_NOT_FOUND'],
      ['directory read', api.call('GET', `/v1/sessions/${session.id}/files?path=/etc`), 400, 'IS_A_DIRECTORY'],
      ['unknown route', api.call('GET', '/v1/nothing'), 404, 'ROUTE_NOT_FOUND'],
      ['wrong method', api.call('PATCH', '/v1/sessions'), 405, 'METHOD_NOT_ALLOWED'],
    ];
    for (const [name, pending, status, code] of cases) {
      const reply = await pending;
      assert.equal(reply.status, status, `${name}: ${JSON.stringify(reply.body)}`);
      assert.equal(reply.body.error.code, code, name);
      assert.ok(reply.body.error.message.length > 0, name);
    }
    assert.equal((await new Api(platform.url, null).call('GET', '/healthz')).status, 200);
  });

  test('absolute host paths and symlinks resolve inside the sandbox, never on the host', { timeout: 60_000 }, async () => {
    const session = await api.createSession({ template: 'tiny' });
    created.push(session.id);
    // The host's own checkout is not visible: the path names a file that does not exist in the sandbox.
    const hostPath = `${process.cwd()}/package.json`;
    assert.equal((await api.call('GET', `/v1/sessions/${session.id}/files?path=${encodeURIComponent(hostPath)}`)).status, 404);
    await api.exec(session.id, `ln -s ${hostPath} /workspace/escape && ln -s / /workspace/root-link`);
    const viaLink = await api.call('GET', `/v1/sessions/${session.id}/files?path=escape`);
    assert.equal(viaLink.status, 404);
    const write = await api.call('PUT', `/v1/sessions/${session.id}/files?path=root-link/written-through-link`, undefined, { raw: 'inside' });
    assert.equal(write.status, 200, JSON.stringify(write.body));
    assert.equal((await api.exec(session.id, 'cat /written-through-link')).stdout, 'inside');
    // The sandbox's /etc/passwd is the template's, not the host's.
    const passwd = (await api.bytes(`/v1/sessions/${session.id}/files?path=/etc/passwd`)).data.toString();
    assert.ok(!passwd.includes('systemd') && passwd.startsWith('root:x:0:0'));
  });

  test('tenants: keys are per tenant and a tenant sees only its own sessions', { timeout: 60_000 }, async () => {
    const tenantA = await api.call('POST', '/v1/tenants', { name: 'a' });
    const tenantB = await api.call('POST', '/v1/tenants', { name: 'b' });
    assert.equal(tenantA.status, 201);
    const keyA = (await api.call('POST', '/v1/keys', { tenantId: tenantA.body.id })).body.key as string;
    const keyB = (await api.call('POST', '/v1/keys', { tenantId: tenantB.body.id })).body.key as string;
    const a = new Api(platform.url, keyA);
    const b = new Api(platform.url, keyB);
    const session = await a.createSession({ template: 'tiny' });
    created.push(session.id);
    assert.equal(session.tenantId, tenantA.body.id);
    assert.equal((await b.call('GET', `/v1/sessions/${session.id}`)).status, 404);
    assert.equal((await b.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: 'true' })).status, 404);
    assert.equal((await b.call('DELETE', `/v1/sessions/${session.id}`)).status, 404);
    assert.deepEqual((await b.call('GET', '/v1/sessions')).body.sessions, []);
    assert.equal((await a.call('GET', '/v1/sessions')).body.sessions.length, 1);
    assert.equal((await b.call('POST', '/v1/tenants', { name: 'c' })).status, 403);
    assert.equal((await api.call('POST', '/v1/keys', { tenantId: 'tn_missing' })).status, 404);
    await a.call('DELETE', `/v1/sessions/${session.id}`);
  });
});
