// What tracing costs an exec: the same platform with OpenTelemetry export off (the default) and on
// (every call traced through the control plane, node and in-sandbox agent, posted to an OTLP
// receiver on loopback), alternated so both see the same noise:
//   node bench/tracing.mjs [--rounds 3] [--execs 150]
// Each round starts a platform without tracing, then one with it, each with one `tiny` session: 10
// warm-up execs, then the measured `exec true` calls through the public API. Prints a table, the
// ratio of on to off (the floor is off, measured in the same run), and writes JSON to bench/results.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OtlpReceiver } from '../packages/e2e/dist/harness/otlp-receiver.js';
import { execRoundTrips, numberOption } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const option = (name, fallback) => numberOption(args, name, fallback);
const rounds = option('--rounds', 3);
const execs = option('--execs', 150);
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const receiver = new OtlpReceiver();
await receiver.start();

const off = [];
const on = [];
for (let round = 0; round < rounds; round++) {
  off.push(...(await execRoundTrips(dataDir, {}, execs)));
  on.push(...(await execRoundTrips(dataDir, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }, execs)));
}
await receiver.stop();
const { results, rows, record } = recorder();
record('exec `true` round trip, tracing off (default)', off);
record('exec `true` round trip, every call traced (OTLP to loopback)', on);
printTable(rows);
const [without, traced] = rows;
const agentSpans = receiver.spans.filter((s) => s.service === 'space-agent').length;
console.log(
  `\ntraced / off: median ${(traced.median / without.median).toFixed(2)}x, p90 ${(traced.p90 / without.p90).toFixed(2)}x (${rounds} rounds of ${execs} alternated); ` +
    `${receiver.spans.length} spans received, ${agentSpans} from in-sandbox agents`,
);
const dir = path.join(root, 'bench/results');
mkdirSync(dir, { recursive: true });
const file = path.join(dir, `tracing-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ rounds, execs, spans: receiver.spans.length, results }, null, 2));
console.log(`JSON: ${file}`);
