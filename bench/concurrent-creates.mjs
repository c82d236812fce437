// N creates (each followed by its first exec) sent at once by one tenant, with the platform's
// default tenant limits (not the benches' raised ones), through the public API with plain HTTP: no
// SDK retry, so a refusal counts as one. The floor is one create + first exec alone, in the same run.
// Usage: ./space script bench/concurrent-creates.mjs [--count 100] [--template base]
import { parseArgs } from 'node:util';
import { benchKey, startPlatform } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const { values } = parseArgs({ options: { count: { type: 'string', default: '100' }, template: { type: 'string', default: 'base' } } });
const count = Number(values.count);
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
  const outcomes = await Promise.all(Array.from({ length: count }, () => createAndExec(platform.url)));
  const succeeded = outcomes.filter((o) => o.ok);
  const refusals = {};
  for (const o of outcomes.filter((x) => !x.ok)) refusals[`${o.status} ${o.code ?? ''}`.trim()] = (refusals[`${o.status} ${o.code ?? ''}`.trim()] ?? 0) + 1;
  record(
    `${count} at once: create + first exec (the ${succeeded.length} that succeeded)`,
    succeeded.map((o) => o.ms),
  );
  printTable(rows);
  console.log(`\n${succeeded.length} of ${count} succeeded; refused or failed: ${JSON.stringify(refusals)}`);
  console.log(JSON.stringify({ count, template: values.template, succeeded: succeeded.length, refusals, results }));
  for (const o of [alone, ...succeeded]) await call(platform.url, 'DELETE', `/v1/sessions/${o.id}`);
} finally {
  await platform.stop();
}
