// N creates (each followed by its first exec) sent at once by one tenant, with the platform's
// default tenant limits (not the benches' raised ones), through the public API with plain HTTP: no
// SDK retry, so a refusal counts as one. The floor is one create + first exec alone, in the same run.
// The burst is sent again `--repeat-after` seconds after the first one's last answer (its sessions
// deleted by then): what a pool that learned the burst serves. 0: one burst only.
// Usage: ./space script bench/concurrent-creates.mjs [--count 100] [--template base] [--repeat-after 60]
import { parseArgs } from 'node:util';
import { benchKey, startPlatform } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

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

async function createAndExec(url) {
  const started = performance.now();
  const created = await call(url, 'POST', '/v1/sessions', {
    template: values.template,
    checkpointIntervalSec: 0,
    fullCheckpointIntervalSec: 0,
    idleTimeoutSec: 0,
  });
  if (created.status !== 201) return { ok: false, status: created.status, code: created.body?.error?.code };
  const ran = await call(url, 'POST', `/v1/sessions/${created.body.id}/exec`, { cmd: ['true'] });
  return { ok: ran.status === 200, status: ran.status, id: created.body.id, ms: performance.now() - started };
}

const platform = await startPlatform(dataDir, defaults);
try {
  const { results, rows, record } = recorder();
  const alone = await createAndExec(platform.url);
  if (!alone.ok) throw new Error(`a create alone failed: ${alone.status}`);
  record('create + first exec, alone (floor)', [alone.ms]);
  await call(platform.url, 'DELETE', `/v1/sessions/${alone.id}`);
  const bursts = [];
  for (const name of repeatAfterSec > 0 ? ['first burst', `again ${repeatAfterSec} s later`] : ['burst']) {
    if (bursts.length > 0) await new Promise((resolve) => setTimeout(resolve, repeatAfterSec * 1000));
    const outcomes = await Promise.all(Array.from({ length: count }, () => createAndExec(platform.url)));
    const succeeded = outcomes.filter((o) => o.ok);
    const refusals = {};
    for (const o of outcomes.filter((x) => !x.ok)) refusals[`${o.status} ${o.code ?? ''}`.trim()] = (refusals[`${o.status} ${o.code ?? ''}`.trim()] ?? 0) + 1;
    record(
      `${count} at once, ${name}: create + first exec (the ${succeeded.length} that succeeded)`,
      succeeded.map((o) => o.ms),
    );
    bursts.push({ name, succeeded: succeeded.length, refusals });
    for (const o of succeeded) await call(platform.url, 'DELETE', `/v1/sessions/${o.id}`);
  }
  printTable(rows);
  for (const b of bursts) console.log(`${b.name}: ${b.succeeded} of ${count} succeeded; refused or failed: ${JSON.stringify(b.refusals)}`);
  console.log(JSON.stringify({ count, template: values.template, repeatAfterSec, bursts, results }));
} finally {
  await platform.stop();
}
