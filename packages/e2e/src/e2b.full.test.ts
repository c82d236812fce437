import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Filesystem, Process } from '@space/e2b';
import { CommandExitError, Sandbox, SandboxNotFoundError } from 'e2b';
import { Api } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The unmodified `e2b` npm package (pinned) against SPACE's `/e2b`, configured only by its two URLs and a key. */
describe('E2B compatibility: the e2b SDK unchanged', () => {
  let platform: RunningPlatform;
  let admin: Api;
  const sessions: string[] = [];
  let opts: { apiKey: string; apiUrl: string; sandboxUrl: string };
  let otherTenant: { apiKey: string; apiUrl: string; sandboxUrl: string };

  let tenant: Api;
  // Registered before the platform's own clean-up, so it runs first: the sessions are the tenant's, not the admin's.
  after(async () => {
    for (const id of sessions.splice(0)) await tenant?.call('DELETE', `/v1/sessions/${id}`);
  });
  platformForSuite(sessions, (p, a) => ((platform = p), (admin = a)));

  const tenantKey = async (name: string, format?: 'e2b'): Promise<string> => {
    const { id: tenantId } = (await admin.call('POST', '/v1/tenants', { name })).body;
    return (await admin.call('POST', '/v1/keys', { tenantId, format })).body.key as string;
  };
  const setUp = async () => {
    if (opts) return;
    const urls = { apiUrl: `${platform.url}/e2b`, sandboxUrl: `${platform.url}/e2b/sandbox` };
    // A key shaped like E2B's, as code that checks the shape needs.
    opts = { apiKey: await tenantKey('e2b', 'e2b'), ...urls };
    assert.match(opts.apiKey, /^e2b_[0-9a-f]{40}$/);
    tenant = new Api(platform.url, opts.apiKey);
    otherTenant = { apiKey: await tenantKey('e2b-other'), ...urls };
  };
  // E2B's default timeout is 15 s (the API's, when the SDK sends none): longer than any test's steps.
  const create = async (extra: Record<string, unknown> = {}): Promise<Sandbox> => {
    const sandbox = await Sandbox.create('base', { ...opts, timeoutMs: 300_000, ...extra });
    sessions.push(sandbox.sandboxId);
    return sandbox;
  };

  test('commands: foreground, streamed callbacks, a failing one raises, background + list + kill, stdin; a sandbox killed under the SDK continues', {
    timeout: 180_000,
  }, async () => {
    await setUp();
    const sandbox = await create({ metadata: { suite: 'e2b' } });
    assert.match(sandbox.sandboxId, /^ses_/, 'an E2B sandbox id is a SPACE session id');

    const hello = await sandbox.commands.run('echo hello; echo oops >&2');
    assert.deepEqual([hello.exitCode, hello.stdout, hello.stderr], [0, 'hello\n', 'oops\n']);

    const seen: string[] = [];
    await sandbox.commands.run('for i in 1 2 3; do echo line$i; sleep 0.05; done', { onStdout: (d) => void seen.push(d) });
    assert.equal(seen.join(''), 'line1\nline2\nline3\n');

    await assert.rejects(sandbox.commands.run('echo bad >&2; exit 3'), (err: unknown) => {
      assert.ok(err instanceof CommandExitError);
      assert.deepEqual([err.exitCode, err.stderr], [3, 'bad\n']);
      return true;
    });

    const background = await sandbox.commands.run('sleep 300', { background: true });
    assert.ok(
      (await sandbox.commands.list()).some((p) => p.pid === background.pid),
      'listed while it runs',
    );
    assert.equal(await sandbox.commands.kill(background.pid), true);
    await sleep(300);
    assert.ok(!(await sandbox.commands.list()).some((p) => p.pid === background.pid), 'gone after kill');

    const reader = await sandbox.commands.run('read line; echo "got $line"', { background: true, stdin: true });
    await sandbox.commands.sendStdin(reader.pid, 'typed\n');
    const read = await reader.wait();
    assert.equal(read.stdout, 'got typed\n');

    // The sandbox dies under the SDK: the session resumes on the next call, same id, files kept.
    await sandbox.files.write('/tmp/kept.txt', 'still here');
    assert.equal((await tenant.call('POST', `/v1/sessions/${sandbox.sandboxId}/sandbox/kill`)).status, 200);
    assert.equal((await sandbox.commands.run('cat /tmp/kept.txt')).stdout, 'still here');
  });

  test('files: write, read, list, exists, makeDir, rename, remove, watchDir', { timeout: 120_000 }, async () => {
    await setUp();
    const sandbox = await create();
    const info = await sandbox.files.write('/tmp/e2b/a.txt', 'alpha');
    assert.deepEqual([info.name, info.path], ['a.txt', '/tmp/e2b/a.txt']);
    assert.equal(await sandbox.files.read('/tmp/e2b/a.txt'), 'alpha');
    // Streamed (application/octet-stream), plain and gzipped.
    const big = Buffer.alloc(3 * 1024 * 1024, 'z');
    await sandbox.files.write('/tmp/e2b/streamed.bin', new Blob([big]).stream());
    await sandbox.files.write('/tmp/e2b/gzipped.bin', new Blob([big]), { gzip: true });
    for (const name of ['streamed.bin', 'gzipped.bin'])
      assert.ok(Buffer.from(await sandbox.files.read(`/tmp/e2b/${name}`, { format: 'bytes' })).equals(big), name);
    // A body that says gzip and is not: 400, and nothing written (the fuzzer's seed 217435213 got 503, "cannot reach SPACE").
    const garbled = await fetch(`${opts.sandboxUrl}/files?path=${encodeURIComponent('/tmp/e2b/garbled.bin')}`, {
      method: 'POST',
      headers: {
        'e2b-sandbox-id': sandbox.sandboxId,
        'x-access-token': (sandbox as unknown as { envdAccessToken: string }).envdAccessToken,
        'content-type': 'application/octet-stream',
        'content-encoding': 'gzip',
      },
      body: new Uint8Array(4096).fill(7),
    });
    assert.equal(garbled.status, 400, await garbled.text());
    assert.equal(await sandbox.files.exists('/tmp/e2b/garbled.bin'), false);
    await sandbox.files.remove('/tmp/e2b/streamed.bin');
    await sandbox.files.remove('/tmp/e2b/gzipped.bin');
    assert.deepEqual(Buffer.from(await sandbox.files.read('/tmp/e2b/a.txt', { format: 'bytes' })).toString(), 'alpha');
    assert.equal(await sandbox.files.makeDir('/tmp/e2b/sub/deeper'), true);
    assert.equal(await sandbox.files.makeDir('/tmp/e2b/sub/deeper'), false, 'false when it exists');
    const names = (await sandbox.files.list('/tmp/e2b')).map((e) => `${e.name}:${e.type}`).sort();
    assert.deepEqual(names, ['a.txt:file', 'sub:dir']);
    assert.deepEqual((await sandbox.files.list('/tmp/e2b', { depth: 2 })).map((e) => e.path).sort(), ['/tmp/e2b/a.txt', '/tmp/e2b/sub', '/tmp/e2b/sub/deeper']);
    const renamed = await sandbox.files.rename('/tmp/e2b/a.txt', '/tmp/e2b/b.txt');
    assert.equal(renamed.path, '/tmp/e2b/b.txt');
    assert.equal(await sandbox.files.exists('/tmp/e2b/a.txt'), false);
    assert.equal(await sandbox.files.exists('/tmp/e2b/b.txt'), true);
    await sandbox.files.remove('/tmp/e2b/sub');
    assert.equal(await sandbox.files.exists('/tmp/e2b/sub'), false);
    await assert.rejects(sandbox.files.read('/tmp/e2b/none.txt'), /FILE_NOT_FOUND|not found/i);

    const events: string[] = [];
    const watcher = await sandbox.files.watchDir('/tmp/e2b', (e) => void events.push(`${e.type}:${e.name}`));
    await sandbox.files.write('/tmp/e2b/new.txt', 'x');
    for (let i = 0; i < 50 && !events.some((e) => e.endsWith(':new.txt')); i++) await sleep(100);
    await watcher.stop();
    assert.ok(
      events.some((e) => e.endsWith(':new.txt')),
      `a change under the watched directory: ${events.join(' ')}`,
    );
  });

  test('metrics: CPU, memory and disk of the sandbox as its cgroup and volume count them; none while paused', { timeout: 120_000 }, async () => {
    await setUp();
    const sandbox = await create();
    // Incompressible (the volume compresses), and counted by its quota group at btrfs's next commit (every second).
    await sandbox.files.write('/tmp/ballast', new Uint8Array(randomBytes(8 * 1024 * 1024)).buffer);
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(250)) {
      if (((await sandbox.getMetrics())[0]?.diskUsed ?? 0) >= 8 * 1024 * 1024) break;
    }
    const spin = await sandbox.commands.run('while :; do :; done', { background: true });
    await sleep(300);
    const [busy] = await sandbox.getMetrics();
    await sandbox.commands.kill(spin.pid);
    assert.ok(busy, 'one sample');
    assert.ok(busy.cpuUsedPct > 20, `a spinning process shows: ${busy.cpuUsedPct}% of ${busy.cpuCount} CPU`);
    assert.equal(busy.cpuCount, 1, 'the default quota, 1 CPU');
    assert.ok(busy.memUsed > 1024 * 1024 && busy.memUsed <= busy.memTotal, `memory ${busy.memUsed} of ${busy.memTotal}`);
    assert.ok(busy.memTotal >= 1024 * 1024 * 1024, 'the 1 GiB default limit (and what gVisor adds)');
    assert.ok(busy.diskUsed >= 8 * 1024 * 1024 && busy.diskUsed < busy.diskTotal, `disk ${busy.diskUsed} of ${busy.diskTotal}`);
    const own = (await tenant.call('GET', `/v1/sessions/${sandbox.sandboxId}/metrics`)).body;
    assert.equal(own.cpuCount, 1, JSON.stringify(own));
    await sandbox.pause();
    assert.deepEqual(await sandbox.getMetrics(), [], 'no sample of a paused sandbox');
    assert.equal((await tenant.call('GET', `/v1/sessions/${sandbox.sandboxId}/metrics`)).body.error.code, 'SESSION_NOT_RUNNING');
    assert.equal((await tenant.call('GET', `/v1/sessions/${sandbox.sandboxId}`)).body.status, 'idle', 'not resumed to give one');
  });

  test("envd over binary protobuf, and the polling watchers E2B's Python SDK uses: only the token that made one polls it", { timeout: 120_000 }, async () => {
    await setUp();
    const sandbox = await create();
    const other = await create();
    const client = <S extends typeof Filesystem | typeof Process>(service: S, id: string, token: string) =>
      createClient(
        service,
        createConnectTransport({
          baseUrl: opts.sandboxUrl,
          httpVersion: '1.1',
          useBinaryFormat: true,
          interceptors: [
            (next) => (req) => {
              req.header.set('e2b-sandbox-id', id);
              req.header.set('x-access-token', token);
              return next(req);
            },
          ],
        }),
      );
    const token = (sandbox as unknown as { envdAccessToken: string }).envdAccessToken;
    const files = client(Filesystem, sandbox.sandboxId, token);
    await sandbox.files.write('/tmp/binary.txt', 'four');
    assert.equal((await files.stat({ path: '/tmp/binary.txt' })).entry?.size, 4n);
    assert.ok(Array.isArray((await client(Process, sandbox.sandboxId, token).list({})).processes));

    const { watcherId } = await files.createWatcher({ path: '/tmp', recursive: false });
    await sandbox.files.write('/tmp/polled.txt', 'x');
    let names: string[] = [];
    for (let i = 0; i < 50 && !names.includes('polled.txt'); i++) {
      names = names.concat((await files.getWatcherEvents({ watcherId })).events.map((e) => e.name));
      await sleep(100);
    }
    assert.ok(names.includes('polled.txt'), `polled: ${names.join(' ')}`);
    const otherToken = (other as unknown as { envdAccessToken: string }).envdAccessToken;
    await assert.rejects(client(Filesystem, other.sandboxId, otherToken).getWatcherEvents({ watcherId }), (err: unknown) => {
      assert.equal((err as ConnectError).code, Code.NotFound, "another sandbox's token does not reach it");
      return true;
    });
    await files.removeWatcher({ watcherId });
    await assert.rejects(files.getWatcherEvents({ watcherId }), (err: unknown) => err instanceof ConnectError && err.code === Code.NotFound);
    await assert.rejects(client(Filesystem, sandbox.sandboxId, 'st_wrong').stat({ path: '/tmp' }), (err: unknown) => {
      assert.equal((err as ConnectError).code, Code.Unauthenticated);
      return true;
    });
  });

  test('pty: create, input, resize, kill', { timeout: 120_000 }, async () => {
    await setUp();
    const sandbox = await create();
    let output = '';
    const terminal = await sandbox.pty.create({ cols: 80, rows: 24, onData: (d) => void (output += Buffer.from(d).toString()) });
    await sandbox.pty.resize(terminal.pid, { cols: 100, rows: 30 });
    await sandbox.pty.sendInput(terminal.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\n'));
    for (let i = 0; i < 50 && !output.includes('pty-42'); i++) await sleep(100);
    assert.match(output, /30 100/, 'the resize reached the terminal');
    assert.match(output, /pty-42/);
    assert.equal(await sandbox.pty.kill(terminal.pid), true);
  });

  test('list with a metadata filter, connect, setTimeout, pause then connect (a background process continues), fork, snapshot, kill; tenants stay apart', {
    timeout: 240_000,
  }, async () => {
    await setUp();
    const sandbox = await create({ metadata: { role: 'listed' }, timeoutMs: 600_000 });
    const listed = await Sandbox.list({ ...opts, query: { metadata: { role: 'listed' } } }).nextItems();
    assert.deepEqual(
      listed.map((s) => [s.sandboxId, s.state, s.metadata.role]),
      [[sandbox.sandboxId, 'running', 'listed']],
    );
    assert.deepEqual(await Sandbox.list({ ...otherTenant }).nextItems(), [], 'another tenant sees none of them');
    await assert.rejects(Sandbox.connect(sandbox.sandboxId, otherTenant), SandboxNotFoundError);

    await sandbox.setTimeout(120_000);
    const info = await sandbox.getInfo();
    assert.ok(Math.abs(info.endAt.getTime() - (Date.now() + 120_000)) < 10_000, `endAt ${info.endAt.toISOString()}`);

    // Its handle let go (as a client that moved on would): a process with a stream attached cannot be saved in memory.
    const counter = await sandbox.commands.run('i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done', {
      background: true,
    });
    await counter.disconnect();
    await sleep(500);
    assert.equal(await sandbox.pause(), true);
    assert.equal((await Sandbox.getInfo(sandbox.sandboxId, opts)).state, 'paused');
    assert.equal((await tenant.call('GET', `/v1/sessions/${sandbox.sandboxId}`)).body.status, 'idle', 'no sandbox while paused');
    assert.equal(await sandbox.pause(), false, 'false when it is paused already');
    const resumed = await Sandbox.connect(sandbox.sandboxId, opts);
    const first = Number((await resumed.commands.run('cat /tmp/count')).stdout);
    await sleep(600);
    const later = Number((await resumed.commands.run('cat /tmp/count')).stdout);
    assert.ok(first > 0 && later > first, `the counter continues after the pause (${first} -> ${later})`);

    const [fork] = (await Sandbox.fork(sandbox.sandboxId, { ...opts, count: 1 } as never)) as unknown as Sandbox[];
    assert.ok(fork, 'one fork');
    sessions.push(fork.sandboxId);
    assert.notEqual(fork.sandboxId, sandbox.sandboxId);
    assert.equal((await fork.commands.run('test -s /tmp/count && echo forked')).stdout, 'forked\n');

    const snapshot = await sandbox.createSnapshot();
    const fromSnapshot = await Sandbox.create(snapshot.snapshotId, { ...opts, timeoutMs: 300_000 });
    sessions.push(fromSnapshot.sandboxId);
    assert.equal((await fromSnapshot.commands.run('test -s /tmp/count && echo from-snapshot')).stdout, 'from-snapshot\n');
    await Sandbox.kill(fromSnapshot.sandboxId, opts);
    assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId, opts), true);

    assert.equal(await Sandbox.kill(sandbox.sandboxId, opts), true);
    assert.equal(await Sandbox.kill(sandbox.sandboxId, opts), false, 'false once it is gone');
    assert.equal((await tenant.call('GET', `/v1/sessions/${sandbox.sandboxId}`)).status, 404);
  });

  test('a sandbox whose timeout passes is killed (or paused with autoPause)', { timeout: 120_000 }, async () => {
    await setUp();
    const killed = await create({ timeoutMs: 2000 });
    const paused = await create({ timeoutMs: 2000, lifecycle: { onTimeout: 'pause' } });
    for (let i = 0; i < 60; i++) {
      const gone = (await tenant.call('GET', `/v1/sessions/${killed.sandboxId}`)).status === 404;
      const idle = (await tenant.call('GET', `/v1/sessions/${paused.sandboxId}`)).body.status === 'idle';
      if (gone && idle) break;
      await sleep(500);
    }
    assert.equal((await tenant.call('GET', `/v1/sessions/${killed.sandboxId}`)).status, 404, 'killed at its timeout');
    assert.equal((await Sandbox.getInfo(paused.sandboxId, opts)).state, 'paused', 'paused at its timeout');
    assert.equal((await (await Sandbox.connect(paused.sandboxId, opts)).commands.run('echo back')).stdout, 'back\n');
  });

  test('raw HTTP: E2B error bodies and statuses for bad keys, unknown ids, bad bodies; unknown procedures are unimplemented', { timeout: 60_000 }, async () => {
    await setUp();
    const call = async (method: string, path: string, init: { key?: string; body?: string; headers?: Record<string, string> } = {}) => {
      const res = await fetch(`${platform.url}${path}`, {
        method,
        headers: { 'content-type': 'application/json', ...(init.key ? { 'x-api-key': init.key } : {}), ...init.headers },
        body: init.body,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    };
    assert.deepEqual((await call('GET', '/e2b/v2/sandboxes')).body.code, 401);
    assert.deepEqual((await call('GET', '/e2b/v2/sandboxes', { key: 'sk_wrong' })).status, 401);
    const missing = await call('GET', '/e2b/sandboxes/ses_doesnotexist1', { key: opts.apiKey });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.code, 404);
    assert.match(missing.body.message, /SESSION_NOT_FOUND/);
    assert.equal((await call('POST', '/e2b/v2/sandboxes', { key: opts.apiKey, body: '{not json' })).status, 400);
    const bad = await call('POST', '/e2b/v2/sandboxes', { key: opts.apiKey, body: JSON.stringify({ templateID: 'base', timeout: -1 }) });
    assert.deepEqual([bad.status, bad.body.code], [400, 400]);
    assert.equal((await call('POST', '/e2b/v2/sandboxes', { key: opts.apiKey, body: JSON.stringify({ templateID: 'no-such-template' }) })).status, 400);
    assert.equal((await call('GET', '/e2b/no/such/route', { key: opts.apiKey })).status, 404);
    const rpc = await call('POST', '/e2b/sandbox/process.Process/Nope', { body: '{}', headers: { 'e2b-sandbox-id': 'ses_x', 'x-access-token': 'st_x' } });
    assert.deepEqual([rpc.status, rpc.body.code], [404, 'unimplemented']);
    const noToken = await call('POST', '/e2b/sandbox/process.Process/List', { body: '{}', headers: { 'e2b-sandbox-id': 'ses_x' } });
    assert.deepEqual([noToken.status, noToken.body.code], [401, 'unauthenticated']);
    const wrongToken = await call('POST', '/e2b/sandbox/process.Process/List', {
      body: '{}',
      headers: { 'e2b-sandbox-id': 'ses_x', 'x-access-token': 'st_x' },
    });
    assert.equal(wrongToken.body.code, 'unauthenticated');
  });
});
