// Exec latency of two SPACE checkouts on this machine, alternated so that both see the same noise:
//   node bench/compare-exec.mjs BEFORE_DIR [AFTER_DIR] [--rounds 3] [--execs 150]
// AFTER_DIR defaults to this checkout; both must be built. Each round starts BEFORE's platform, then
// AFTER's, each time on a fresh platform with one `tiny` session: 10 warm-up execs, then the measured
// `exec true` calls through the public API. Prints a table, the ratio, and writes JSON to bench/results.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execRoundTrips, numberOption } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const option = (name, fallback) => numberOption(args, name, fallback);
const dirs = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'));
if (dirs.length < 1) {
  console.error('usage: node bench/compare-exec.mjs BEFORE_DIR [AFTER_DIR] [--rounds N] [--execs N]');
  process.exit(2);
}
const trees = [path.resolve(dirs[0]), path.resolve(dirs[1] ?? root)];
const rounds = option('--rounds', 3);
const execs = option('--execs', 150);
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';

const samples = [[], []];
for (let round = 0; round < rounds; round++) {
  for (const [i, tree] of trees.entries()) samples[i].push(...(await execRoundTrips(dataDir, {}, execs, tree)));
}
const { results, rows, record } = recorder();
record(`exec \`true\` round trip, before (${trees[0]})`, samples[0]);
record(`exec \`true\` round trip, after (${trees[1]})`, samples[1]);
printTable(rows);
const [before, after] = rows;
console.log(
  `\nafter / before: median ${(after.median / before.median).toFixed(2)}x, p90 ${(after.p90 / before.p90).toFixed(2)}x (${rounds} rounds of ${execs} alternated)`,
);
const dir = path.join(root, 'bench/results');
mkdirSync(dir, { recursive: true });
const file = path.join(dir, `compare-exec-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ trees, rounds, execs, results }, null, 2));
console.log(`JSON: ${file}`);
