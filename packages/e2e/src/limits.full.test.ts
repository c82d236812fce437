import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Space, isSpaceApiError } from '@space/sdk';
import { Api, metricValue } from './client.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

/**
 * Every tenant is held to its limits and every session to its disk, on a real platform: a refusal
 * names the limit and the setting that raises it, and loses nothing.
 */
describe('limits: what one tenant or session may take', () => {
  let platform: RunningPlatform;
  let admin: Api;
  const sessions: string[] = [];

  platformForSuite(sessions, (p, a) => ((platform = p), (admin = a)), {
    env: { SPACE_TENANT_MAX_SESSIONS: '2', SPACE_TENANT_REQUESTS_PER_SEC: '20', SPACE_TENANT_MAX_CHECKPOINT_GB: '0.001' },
  });

  async function newTenant(name: string): Promise<Api> {
    const { id } = (await admin.call('POST', '/v1/tenants', { name })).body;
    return new Api(platform.url, (await admin.call('POST', '/v1/keys', { tenantId: id })).body.key);
  }

  async function created(api: Api, body: Record<string, unknown> = {}): Promise<string> {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0, ...body });
    sessions.push(session.id);
    return session.id;
  }

  test('sessions, request rate and checkpoint storage: refused with the limit named, the tenant keeps what it has', { timeout: 120_000 }, async () => {
    const tenant = await newTenant('limited');
    const first = await created(tenant);
    await tenant.exec(first, 'echo kept > /workspace/kept');
    await tenant.exec(first, 'sleep 600', { background: true });
    await created(tenant);

    const third = await tenant.call('POST', '/v1/sessions', { template: 'tiny' });
    assert.equal(third.status, 403);
    assert.equal(third.body.error.code, 'QUOTA_EXCEEDED');
    assert.deepEqual(third.body.error.details, { limit: 'sessions', max: 2, setting: 'SPACE_TENANT_MAX_SESSIONS' });
    assert.equal((await tenant.call('GET', '/v1/sessions')).body.sessions.length, 2);

    // The first memory image fits under the storage limit; the next becomes an fs checkpoint.
    assert.equal((await tenant.call('POST', `/v1/sessions/${first}/checkpoints`, { kind: 'full' })).status, 201);
    const refused = await tenant.call('POST', `/v1/sessions/${first}/checkpoints`, { kind: 'full' });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.details.limit, 'checkpointStorageBytes');
    const fallback = refused.body.error.details.fallbackCheckpointId;
    const kinds = (await tenant.call('GET', `/v1/sessions/${first}/checkpoints`)).body.checkpoints.map(
      (c: { id: string; kind: string }) => `${c.kind}:${c.id === fallback}`,
    );
    assert.deepEqual(kinds, ['full:false', 'fs:true']);

    // A burst past twice the rate: some calls are refused with when to retry; another tenant is not slowed.
    const replies = await Promise.all(Array.from({ length: 80 }, () => tenant.call('GET', '/v1/limits')));
    const limited = replies.filter((r) => r.status === 429);
    assert.ok(limited.length >= 30, `${limited.length} of 80 refused`);
    assert.ok(replies.every((r) => r.status === 200 || r.status === 429));
    assert.equal(limited[0]!.body.error.details.limit, 'requestsPerSec');
    assert.equal((await admin.call('GET', '/v1/sessions')).status, 200);
    await new Promise((r) => setTimeout(r, 2100));

    // The SDK waits such refusals out by their Retry-After: the same burst through it all succeeds; with retry off it throws.
    const patient = new Space({ apiUrl: platform.url, apiKey: tenant.key! });
    assert.equal((await Promise.all(Array.from({ length: 80 }, () => patient.limits()))).length, 80);
    await new Promise((r) => setTimeout(r, 2100));
    const strict = new Space({ apiUrl: platform.url, apiKey: tenant.key!, retry: false });
    const outcomes = await Promise.allSettled(Array.from({ length: 80 }, () => strict.limits()));
    assert.ok(outcomes.some((o) => o.status === 'rejected' && isSpaceApiError(o.reason, 'TOO_MANY_REQUESTS')));
    await new Promise((r) => setTimeout(r, 2100));

    const view = (await tenant.call('GET', '/v1/limits')).body;
    assert.equal(view.limits.sessions.used, 2);
    assert.ok(view.limits.checkpointStorageBytes.used > 0);
    assert.equal(view.defaultDiskGb, 10);
    assert.equal((await tenant.exec(first, 'cat /workspace/kept')).stdout, 'kept\n', 'nothing of the session was lost');

    const cli = (...args: string[]) =>
      promisify(execFile)(process.execPath, [cliMain, ...args], { env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: tenant.key! } });
    assert.equal(JSON.parse((await cli('limits', '--json')).stdout).limits.sessions.max, 2);
    assert.match((await cli('limits')).stdout, /sessions\s+2 \/ 2\s+SPACE_TENANT_MAX_SESSIONS/);
    await assert.rejects(cli('create', '-t', 'tiny', '--disk', '1'), (err: { stderr: string }) => {
      assert.match(err.stderr, /QUOTA_EXCEEDED: .*SPACE_TENANT_MAX_SESSIONS.*space limits/);
      return true;
    });

    const metrics = (await admin.call('GET', '/metrics')).body as string;
    assert.equal(metricValue(metrics, 'space_tenant_limit{limit="sessions"}'), 2);
    assert.ok(metricValue(metrics, 'space_requests_refused_total{reason="requestsPerSec"}') >= 30);
    assert.equal(metricValue(metrics, 'space_requests_refused_total{reason="sessions"}'), 2);
  });

  test('a sandbox that fills its disk gets "Disk quota exceeded"; other sessions keep writing, and the quota holds after a resume', {
    timeout: 180_000,
  }, async () => {
    const tenant = await newTenant('disks');
    const small = await created(tenant, { resources: { diskGb: 0.1 } });
    const other = await created(tenant);
    const fill = 'dd if=/dev/urandom of=/workspace/big bs=1M count=200 2>&1; echo exit=$?';
    const filled = await tenant.exec(small, fill, { timeoutMs: 60_000 });
    assert.match(filled.stdout, /quota/i, filled.stdout);
    assert.match(filled.stdout, /exit=1/);
    const written = Number((await tenant.exec(small, 'wc -c < /workspace/big')).stdout);
    assert.ok(written > 50e6 && written < 0.1 * 1024 ** 3, `${written} bytes written under a 0.1 GB disk`);

    // More than the small session's whole disk (dd's reads of urandom may come short of 1 MiB each).
    const otherWrote = Number((await tenant.exec(other, 'dd if=/dev/urandom of=/workspace/f bs=1M count=150 2>/dev/null && wc -c < /workspace/f')).stdout);
    assert.ok(otherWrote > 0.1 * 1024 ** 3, `${otherWrote} bytes`);

    // Room again once the file is gone; held again after the sandbox died and the session resumed.
    await tenant.exec(small, 'rm /workspace/big && echo fits > /workspace/small');
    assert.equal((await tenant.call('POST', `/v1/sessions/${small}/sandbox/kill`)).status, 200);
    const again = await tenant.exec(small, fill, { timeoutMs: 60_000 });
    assert.match(again.stdout, /quota/i);
    assert.equal((await tenant.exec(small, 'cat /workspace/small')).stdout, 'fits\n');
  });

  test('a session filled to its disk limit restarts after a kill, answers, and frees space with rm', { timeout: 180_000 }, async () => {
    const tenant = await newTenant('full-disks');
    const full = await created(tenant, { resources: { diskGb: 0.1 } });
    // Filled to the last block: dd up to the quota, then small files into what is left.
    await tenant.exec(
      full,
      'dd if=/dev/urandom of=/workspace/big bs=1M count=200 2>/dev/null; i=0; while echo x > /workspace/f$i 2>/dev/null; do i=$((i+1)); done; echo $i',
      { timeoutMs: 60_000 },
    );
    const refused = await tenant.call('PUT', `/v1/sessions/${full}/files?path=/workspace/more`, undefined, { raw: 'more' });
    assert.equal(refused.body.error?.code, 'NO_SPACE', JSON.stringify(refused.body));
    assert.equal((await tenant.call('POST', `/v1/sessions/${full}/sandbox/kill`)).status, 200);
    const answered = await tenant.call('POST', `/v1/sessions/${full}/exec`, { cmd: ['echo', 'up'] });
    assert.equal(answered.status, 200, `a full session starts again: ${JSON.stringify(answered.body)}`);
    assert.equal(answered.body.stdout, 'up\n');
    assert.equal((await tenant.exec(full, 'rm /workspace/big && echo fits > /workspace/small && cat /workspace/small')).stdout, 'fits\n');
    const session = (await tenant.call('GET', `/v1/sessions/${full}`)).body;
    assert.equal(session.status, 'running');
  });

  test('processes past the pids limit fail to fork with EAGAIN inside; the sandbox lives', { timeout: 180_000 }, async () => {
    const tenant = await newTenant('pids');
    const roomy = await created(tenant);
    const sandbox = (await tenant.call('GET', `/v1/sessions/${roomy}`)).body.sandbox.id;
    // 300 processes in a default session (pids 1024): they all run.
    const many = await tenant.exec(roomy, 'i=0; while [ $i -lt 300 ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); done; echo started $i; ps | wc -l', {
      timeoutMs: 60_000,
    });
    assert.match(many.stdout, /started 300/, many.stdout + many.stderr);
    assert.ok(Number(many.stdout.trim().split('\n').at(-1)) > 300, many.stdout);
    // A fork bomb held to a small limit: fork fails inside, the shell that started it answers.
    // Made by the CLI, with every resource flag.
    const made = await promisify(execFile)(process.execPath, [cliMain, 'create', '-t', 'tiny', '--pids', '64', '--memory', '600', '--cpus', '2', '--json'], {
      env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: tenant.key! },
    });
    const smallData = JSON.parse(made.stdout);
    const small: string = smallData.id;
    sessions.push(small);
    assert.deepEqual([smallData.resources.pids, smallData.resources.memoryMb, smallData.resources.cpus], [64, 600, 2]);
    // runsc's --cpu-num-from-quota: the CPUs the session may use, never under 2 nor over the host's.
    for (const [id, cpus] of [
      [roomy, 1],
      [small, 2],
    ] as const) {
      const shown = Number((await tenant.exec(id, 'nproc')).stdout);
      assert.equal(shown, Math.min(availableParallelism(), Math.max(2, Math.ceil(cpus))), `nproc with cpus ${cpus}`);
    }
    const bomb = await tenant.exec(small, 'i=0; while [ $i -lt 200 ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); done 2>&1 | head -3; echo done', {
      timeoutMs: 60_000,
    });
    assert.match(bomb.stdout, /can't fork|Resource temporarily unavailable/, bomb.stdout);
    assert.match(bomb.stdout, /done/);
    assert.equal((await tenant.exec(small, 'kill $(pgrep sleep) 2>/dev/null; echo alive')).stdout, 'alive\n');
    assert.equal((await tenant.exec(roomy, 'echo alive')).stdout, 'alive\n');
    assert.equal((await tenant.call('GET', `/v1/sessions/${roomy}`)).body.sandbox.id, sandbox, 'the same sandbox: it never died');
  });

  test('a 1.5 GB allocation in a 512 MB session kills that process only; the shell that started it answers', { timeout: 180_000 }, async () => {
    const tenant = await newTenant('memory');
    const small = await created(tenant, { template: 'base', resources: { memoryMb: 512 } });
    const sandbox = (await tenant.call('GET', `/v1/sessions/${small}`)).body.sandbox.id;
    const meminfo = await tenant.exec(small, 'head -1 /proc/meminfo');
    assert.match(meminfo.stdout, /MemTotal:\s+524288 kB/, `the sandbox sees its session's memory: ${meminfo.stdout}`);
    const hog = await tenant.exec(small, `python3 -c 'b = b"x" * (1500 * 2**20); print("allocated")'; echo "shell-alive $?"`, { timeoutMs: 60_000 });
    assert.doesNotMatch(hog.stdout, /allocated/);
    assert.match(hog.stdout, /shell-alive 137/, JSON.stringify(hog));
    assert.equal((await tenant.exec(small, 'echo alive')).stdout, 'alive\n');
    assert.equal((await tenant.call('GET', `/v1/sessions/${small}`)).body.sandbox.id, sandbox, 'the same sandbox: it never died');
  });
});
