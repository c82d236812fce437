// Where a pooled create's time goes, from its trace: sequential creates of `tiny` from a warm pool
// that is full and quiet before each one (no refill, no other session's checkpoints), each traced
// through the control plane, the node agent and the in-sandbox agent (OTLP to a receiver on
// loopback), then the median and P90 of the call and of its parts:
//   node bench/create-spans.mjs [--creates 30] [--pool 12]
// The floor is the node agent's own part (its span), measured in the same calls. Prints a table,
// writes JSON to bench/results.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OtlpReceiver } from '../packages/e2e/dist/harness/otlp-receiver.js';
import { api, benchKey, metric, startPlatform, timed, numberOption } from './harness.mjs';
import { printTable, recorder, summarize } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const option = (name, fallback) => numberOption(args, name, fallback);
const creates = option('--creates', 30);
const poolSize = option('--pool', 12);
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const receiver = new OtlpReceiver();
await receiver.start();
const platform = await startPlatform(dataDir, {
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  SPACE_POOL_SIZE: String(poolSize),
  SPACE_POOL_TEMPLATES: 'tiny',
  // The pool stays at its size: no demand-driven boots between the creates.
  SPACE_POOL_MAX_MEMORY_MB: '0',
  SPACE_TEMPLATE_IMAGES: '0',
});
const ready = async () => (await metric(platform.url, 'space_pool_ready{template="tiny"}')) || 0;
const calls = [];
try {
  for (let i = 0; i < creates; i++) {
    while ((await ready()) < poolSize) await sleep(200);
    await sleep(1000);
    const traceId = randomBytes(16).toString('hex');
    const [ms, session] = await timed(() =>
      fetch(`${platform.url}/v1/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${benchKey}`, 'content-type': 'application/json', traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
        body: JSON.stringify({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 }),
      }).then((res) => res.json()),
    );
    calls.push({ ms, traceId, id: session.id });
  }
  await sleep(2000);
  for (const { id } of calls) await api(platform.url, 'DELETE', `/v1/sessions/${id}`);
} finally {
  await platform.stop();
  await receiver.stop();
}

const spanMs = (s) => Number(s.endNs - s.startNs) / 1e6;
const span = (traceId, name) => {
  const found = receiver.trace(traceId).find((s) => s.name === name);
  return found ? spanMs(found) : Number.NaN;
};
// The control plane's statements have a span each (`INSERT sessions`…), with their text.
const isStatement = (s) => 'db.query.text' in s.attributes;
const { results, rows, record } = recorder();
record(
  'pooled create, the whole call (client)',
  calls.map((c) => c.ms),
);
record(
  '  control plane (its span)',
  calls.map((c) => span(c.traceId, 'POST /v1/sessions')),
);
record(
  '  node agent (its span: the floor)',
  calls.map((c) => span(c.traceId, 'POST /node/v1/sandboxes')),
);
record(
  '    claim (rename, CPU weight, disk limit, record)',
  calls.map((c) => span(c.traceId, 'claim')),
);
const statementsMs = (c) =>
  receiver
    .trace(c.traceId)
    .filter(isStatement)
    .reduce((ms, s) => ms + spanMs(s), 0);
record('  control plane statements (sum of their spans)', calls.map(statementsMs));
// What is left of the control plane's span once its statements and the node's part are taken out:
// its own code (authentication, validation, placement, events) and its waits on the event loop.
record(
  '  control plane outside statements and node',
  calls.map((c) => span(c.traceId, 'POST /v1/sessions') - statementsMs(c) - span(c.traceId, 'POST /node/v1/sandboxes')),
);
printTable(rows);
// Every span of the creates by name (statements apart): how often in a create, median ms each.
const spansByName = (spans) => {
  const byName = new Map();
  for (const s of spans) byName.set(s.name, [...(byName.get(s.name) ?? []), spanMs(s)]);
  return [...byName].map(([name, ms]) => `${name} ×${(ms.length / calls.length).toFixed(1)} ${summarize(ms).median.toFixed(2)}`).join(', ');
};
const all = calls.flatMap((c) => receiver.trace(c.traceId));
console.log(`\nstatements per create (median ms each): ${spansByName(all.filter(isStatement))}`);
console.log(`other spans per create (median ms each): ${spansByName(all.filter((s) => !isStatement(s)))}`);
// The median call, span by span in the order they started: where the gaps between them are.
const medianCall = [...calls].sort((a, b) => a.ms - b.ms)[Math.ceil(calls.length / 2) - 1];
const medianSpans = receiver.trace(medianCall.traceId).sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
const originNs = medianSpans[0]?.startNs ?? 0n;
console.log(`\nthe median call (${medianCall.ms.toFixed(1)} ms), span by span: start ms, duration ms, service, name`);
for (const s of medianSpans)
  console.log(`  ${(Number(s.startNs - originNs) / 1e6).toFixed(2).padStart(7)} ${spanMs(s).toFixed(2).padStart(7)}  ${s.service}  ${s.name}`);
const [whole, , node] = rows;
console.log(`\nwhole / node agent: median ${(whole.median / node.median).toFixed(2)}x (${creates} creates, pool of ${poolSize})`);
const dir = path.join(root, 'bench/results');
mkdirSync(dir, { recursive: true });
const file = path.join(dir, `create-spans-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ creates, poolSize, results }, null, 2));
console.log(`JSON: ${file}`);
