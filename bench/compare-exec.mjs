// Exec latency of two SPACE checkouts on this machine, alternated so that both see the same noise:
//   node bench/compare-exec.mjs BEFORE_DIR [AFTER_DIR] [--rounds 3] [--execs 150] [--cpus 1] [--transfer-mb 0]
// AFTER_DIR defaults to this checkout; both must be built. Each round starts BEFORE's platform, then
// AFTER's, each time on a fresh platform with one `tiny` session of `--cpus` CPUs: 10 warm-up execs,
// then the measured `exec true` calls through the public API, then (with `--transfer-mb`) three
// uploads and downloads of that size through the files API. Prints a table, the ratios, and writes
// JSON to bench/results.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { numberOption, sessionRoundTrips } from './harness.mjs';
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
const cpus = option('--cpus', 1);
const transferMb = option('--transfer-mb', 0);
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';

const samples = trees.map(() => ({ exec: [], upload: [], download: [] }));
for (let round = 0; round < rounds; round++) {
  for (const [i, tree] of trees.entries()) {
    const run = await sessionRoundTrips(dataDir, {}, { execs, cpus, transferMb }, tree);
    for (const kind of Object.keys(run)) samples[i][kind].push(...run[kind]);
  }
}
const { results, rows, record } = recorder();
const kinds = [
  ['exec', 'exec `true` round trip', 'ms'],
  ['upload', `upload of ${transferMb} MB`, 'MB/s'],
  ['download', `download of ${transferMb} MB`, 'MB/s'],
].filter(([kind]) => samples[0][kind].length > 0);
for (const [kind, what, unit] of kinds) {
  record(`${what}, before (${trees[0]})`, samples[0][kind], unit);
  record(`${what}, after (${trees[1]})`, samples[1][kind], unit);
}
printTable(rows);
console.log(`\nafter / before (${rounds} rounds alternated, ${execs} execs each, session of ${cpus} CPU):`);
for (const [i, [kind]] of kinds.entries()) {
  const [before, after] = rows.slice(i * 2, i * 2 + 2);
  console.log(`  ${kind}: median ${(after.median / before.median).toFixed(2)}x, p90 ${(after.p90 / before.p90).toFixed(2)}x`);
}
const dir = path.join(root, 'bench/results');
mkdirSync(dir, { recursive: true });
const file = path.join(dir, `compare-exec-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ trees, rounds, execs, cpus, transferMb, results }, null, 2));
console.log(`JSON: ${file}`);
