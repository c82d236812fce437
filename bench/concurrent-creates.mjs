// N creates (each followed by its first exec) sent at once by one tenant, with the platform's
// default tenant limits (not the benches' raised ones), through the public API with plain HTTP: no
// SDK retry, so a refusal counts as one. The floor is one create + first exec alone, in the same run.
// The burst is sent again `--repeat-after` seconds after the first one's last answer (its sessions
// deleted by then): what a pool that learned the burst serves. 0: one burst only. Each burst's CPU is
// measured too: the whole host's (/proc/stat) and the platform process's, per create + first exec,
// and so are its floors, in the same run: the host CPU of one create + first exec alone, booted (a
// create the pool cannot serve: 1 MiB more memory) and pooled; a burst of N cannot end before
// N × that / the host's cores (the first burst boots, a repeat finds the pool ready).
// Usage: ./space script bench/concurrent-creates.mjs [--count 100] [--template base] [--repeat-after 60]
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { benchKey, hostCpuMs, metric, startPlatform, waitUntil } from './harness.mjs';
import { processUse } from './scale/processes.mjs';
import { printTable, recorder, summarize } from './stats.mjs';

const { values } = parseArgs({
  options: { count: { type: 'string', default: '100' }, template: { type: 'string', default: 'base' }, 'repeat-after': { type: 'string', default: '60' } },
});
const count = Number(values.count);
const repeatAfterSec = Number(values['repeat-after']);
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
// The defaults (settings.ts), over the harness's raised limits.
const defaults = {
  SPACE_TENANT_MAX_CONCURRENT_CREATES: '16',
  SPACE_TENANT_REQUESTS_PER_SEC: '100',
  SPACE_TENANT_MAX_SESSIONS: '200',
  SPACE_TENANT_MAX_REQUESTS: '256',
  SPACE_TENANT_MAX_STREAMS: '64',
};

async function call(url, method, p, body) {
  const res = await fetch(url + p, {
    method,
    headers: { authorization: `Bearer ${benchKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

async function createAndExec(url, resources = undefined) {
  const started = performance.now();
  const created = await call(url, 'POST', '/v1/sessions', {
    template: values.template,
    checkpointIntervalSec: 0,
    fullCheckpointIntervalSec: 0,
    idleTimeoutSec: 0,
    ...(resources ? { resources } : {}),
  });
  if (created.status !== 201) return { ok: false, status: created.status, code: created.body?.error?.code };
  const ran = await call(url, 'POST', `/v1/sessions/${created.body.id}/exec`, { cmd: ['true'] });
  return { ok: ran.status === 200, status: ran.status, id: created.body.id, ms: performance.now() - started };
}

/**
 * One create + first exec at a time, `times` times, each with the pool full and quiet: its time and
 * the host CPU it took. `resources` the pool does not hold make each one boot.
 */
async function alone(url, times, resources) {
  const ms = [];
  const cpuMs = [];
  for (let i = 0; i < times; i++) {
    await waitUntil(async () => (await metric(url, `space_pool_ready{template="${values.template}"}`)) >= 2, 120_000, 'the pool refilled');
    await new Promise((r) => setTimeout(r, 1000));
    const before = hostCpuMs().busy;
    const one = await createAndExec(url, resources);
    cpuMs.push(hostCpuMs().busy - before);
    if (!one.ok) throw new Error(`a create alone failed: ${one.status}`);
    ms.push(one.ms);
    await call(url, 'DELETE', `/v1/sessions/${one.id}`);
  }
  return { ms, cpuMs };
}

const platform = await startPlatform(dataDir, defaults);
try {
  const { results, rows, record } = recorder();
  const booted = await alone(platform.url, 3, { memoryMb: 1025 });
  const pooled = await alone(platform.url, 5);
  record('create + first exec alone, booted (floor)', booted.ms);
  record('create + first exec alone, pooled (floor)', pooled.ms);
  const floorCpuMs = { booted: summarize(booted.cpuMs).median, pooled: summarize(pooled.cpuMs).median };
  const cores = availableParallelism();
  const bursts = [];
  for (const name of repeatAfterSec > 0 ? ['first burst', `again ${repeatAfterSec} s later`] : ['burst']) {
    if (bursts.length > 0) await new Promise((resolve) => setTimeout(resolve, repeatAfterSec * 1000));
    const [hostBefore, platformBefore, started] = [hostCpuMs(), processUse(platform.pid).cpuSec, performance.now()];
    const outcomes = await Promise.all(Array.from({ length: count }, () => createAndExec(platform.url)));
    const wallMs = performance.now() - started;
    // What the burst cost the machine (every process: the platform, runsc, gVisor, host commands) and the platform's own process.
    const cpu = { hostMs: hostCpuMs().busy - hostBefore.busy, platformMs: (processUse(platform.pid).cpuSec - platformBefore) * 1000 };
    const succeeded = outcomes.filter((o) => o.ok);
    const refusals = {};
    for (const o of outcomes.filter((x) => !x.ok)) {
      const why = `${o.status} ${o.code ?? ''}`.trim();
      refusals[why] = (refusals[why] ?? 0) + 1;
    }
    record(
      `${count} at once, ${name}: create + first exec (the ${succeeded.length} that succeeded)`,
      succeeded.map((o) => o.ms),
    );
    bursts.push({ name, succeeded: succeeded.length, refusals, wallMs, cpu });
    for (const o of succeeded) await call(platform.url, 'DELETE', `/v1/sessions/${o.id}`);
  }
  printTable(rows);
  console.log(
    `one create + first exec alone took ${floorCpuMs.booted} ms of the host's CPU booted, ${floorCpuMs.pooled} ms pooled (medians); the host has ${cores} cores`,
  );
  for (const [i, b] of bursts.entries()) {
    console.log(`${b.name}: ${b.succeeded} of ${count} succeeded; refused or failed: ${JSON.stringify(b.refusals)}`);
    const per = (ms) => (ms / count).toFixed(1);
    // The first burst boots; a repeat finds the pool that learned it (pooled, as far as its budget holds them).
    b.floorMs = (count * (i === 0 ? floorCpuMs.booted : floorCpuMs.pooled)) / cores;
    console.log(
      `  ${(b.wallMs / 1000).toFixed(1)} s in all, ${(b.wallMs / b.floorMs).toFixed(2)}x its CPU floor (${(b.floorMs / 1000).toFixed(1)} s, ${i === 0 ? 'booted' : 'pooled'}); CPU per create + first exec: ${per(b.cpu.hostMs)} ms of the host's, ${per(b.cpu.platformMs)} ms of the platform process's`,
    );
  }
  console.log(JSON.stringify({ count, template: values.template, repeatAfterSec, cores, floorCpuMs, bursts, results }));
} finally {
  await platform.stop();
}
