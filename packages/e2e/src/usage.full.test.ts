import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Api } from './client.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';
import { TestUpstream } from './test-upstream.js';
import { cpuLoad } from './cpu-load.js';

const execFileAsync = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Usage metering end to end: a known CPU load and a known egress volume in a real sandbox, measured
 * by the node from its cgroup and gateway, collected by the control plane's maintenance, and read
 * back through `GET /v1/usage`, `space usage` and `/metrics`.
 */
describe('usage metering', () => {
  const upstream = new TestUpstream(['plain.test.space']);
  let platform: RunningPlatform;
  let admin: Api;
  const sessions: string[] = [];
  // Sampled every second (and collected every maintenance pass), so the test waits seconds, not minutes.
  platformForSuite(sessions, (p, a) => ((platform = p), (admin = a)), { upstream, env: { SPACE_USAGE_SAMPLE_SEC: '1', SPACE_MAINTENANCE_TICK_MS: '1000' } });

  test('a known CPU load and egress volume are metered within the stated bounds, per session and tenant', { timeout: 300_000 }, async (t) => {
    const tenantId = (await admin.call('POST', '/v1/tenants', { name: `usage-${Date.now()}` })).body.id as string;
    const api = new Api(platform.url, (await admin.call('POST', '/v1/keys', { tenantId })).body.key);
    const createdAt = Date.now();
    const session = await api.createSession({ template: 'base' });
    sessions.push(session.id);
    // 100 MiB written to the volume (held while the rest is measured) and two seconds of a busy loop, with the CPU time the sandbox counted for them.
    const loadSeconds = await cpuLoad(api, session.id, 2, 'head -c 104857600 /dev/urandom > big; sync');
    assert.ok(loadSeconds > 1, `the loop ran on a CPU: ${loadSeconds} s`);
    const bytes = 3_000_000;
    const fetched = await api.exec(session.id, ['sh', '-c', `curl -sS -m 30 -o /dev/null -w '%{size_download}' http://plain.test.space/bytes?n=${bytes}`], {
      timeoutMs: 60_000,
    });
    assert.equal(fetched.stdout, String(bytes), fetched.stderr);
    assert.equal((await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, {})).status, 201);

    const report = async () => (await api.call('GET', `/v1/usage?groupBy=session&sessionId=${session.id}`)).body;
    let usage = await report();
    // The volume's 100 MiB (random: the volume is compressed) seen for two seconds at least.
    const twoSecondsOfTheFile = (2 * 100) / 1024 / 3600;
    const metered = (row: any) => row?.egressBytesIn >= bytes && row?.cpuSeconds >= loadSeconds && row?.diskGbHours >= twoSecondsOfTheFile;
    for (let i = 0; i < 60 && !metered(usage.rows[0]); i++) {
      await sleep(1000);
      usage = await report();
    }
    const [row] = usage.rows;
    assert.ok(row, `metered: ${JSON.stringify(usage)}`);
    const elapsed = (Date.now() - createdAt) / 1000;
    t.diagnostic(`load ${loadSeconds} s, ${elapsed} s after the create: ${JSON.stringify(row)}`);
    // CPU: the cgroup counts the loop, gVisor's own work and the sandbox's boot and execs: at least the loop, and not a second more than it and its boot.
    assert.ok(row.cpuSeconds >= loadSeconds * 0.95 && row.cpuSeconds <= loadSeconds + 3, `cpu ${row.cpuSeconds} s for a load of ${loadSeconds} s`);
    // Egress: the body and the headers of one request.
    assert.ok(row.egressBytesIn >= bytes && row.egressBytesIn <= bytes + 4096, `received ${row.egressBytesIn} of ${bytes}`);
    assert.equal(row.egressRequests, 1);
    assert.ok(row.sandboxSeconds > 2 && row.sandboxSeconds <= elapsed + 1, `sandbox ${row.sandboxSeconds} s in ${elapsed} s`);
    assert.ok(row.memoryGbSeconds > 0 && row.memoryGbSeconds <= elapsed * 2, `memory ${row.memoryGbSeconds} GiB·s`);
    assert.equal(row.checkpoints, 1);
    // At most 100 MiB and the session's other files (a few MiB) over its life.
    assert.ok(row.diskGbHours >= twoSecondsOfTheFile && row.diskGbHours <= (0.125 * elapsed) / 3600, `disk ${row.diskGbHours} GiB·h in ${elapsed} s`);
    assert.equal(row.tenantId, tenantId);

    // The tenant's own view, the CLI's, and the admin's across tenants agree.
    const cli = await execFileAsync(process.execPath, [cliMain, 'usage', '--group-by', 'tenant', '--json'], {
      env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: api.key! },
    });
    const byTenant = JSON.parse(cli.stdout);
    assert.deepEqual(
      byTenant.rows.map((r: { tenantId: string }) => r.tenantId),
      [tenantId],
    );
    assert.ok(byTenant.totals.cpuSeconds >= row.cpuSeconds);
    const table = await execFileAsync(process.execPath, [cliMain, 'usage'], { env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: api.key! } });
    assert.match(table.stdout, /by day[\s\S]*cpu s[\s\S]*total/);
    const all = (await admin.call('GET', '/v1/usage?groupBy=tenant')).body;
    assert.ok(all.rows.some((r: { tenantId: string }) => r.tenantId === tenantId));
    assert.equal((await api.call('GET', '/v1/usage?tenant=tn_admin000')).status, 403, "another tenant's usage");
    assert.equal((await api.call('GET', '/v1/usage?groupBy=week')).status, 400);

    // /metrics: aggregate without a key; each tenant's usage with the admin key only.
    const series = `space_tenant_cpu_seconds_total{tenant="${tenantId}"}`;
    const anonymous = await new Api(platform.url, null).call('GET', '/metrics');
    assert.equal(String(anonymous.body).includes('tenant="'), false, 'no tenant is named without the admin key');
    assert.equal((await api.call('GET', '/metrics')).status, 403, "a tenant's key does not read every tenant's usage");
    const metrics = String((await admin.call('GET', '/metrics')).body);
    assert.ok(
      Number(
        metrics
          .split('\n')
          .find((l) => l.startsWith(`${series} `))
          ?.split(' ')[1],
      ) >= row.cpuSeconds,
      metrics,
    );
  });
});
