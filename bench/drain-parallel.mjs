// What moving sessions in parallel gains a drain: the cluster test's drain of 9 sessions off one
// node, with SPACE_DRAIN_PARALLEL=1 (one at a time: the floor) and with the default, alternated
// round by round so both see the same machine. Each round runs `./space test cluster.full` (about
// 2.5 minutes) and reads the time the test prints.
// Usage: node bench/drain-parallel.mjs [--rounds N] [--parallel P]
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { printTable, recorder } from './stats.mjs';

const run = promisify(execFile);
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const rounds = arg('--rounds', 2);
const parallel = arg('--parallel', 4);

/** One drain's milliseconds, as the cluster test prints it with SPACE_DRAIN_PARALLEL=`p`. */
async function drainMs(p) {
  const { stdout } = await run(path.join(root, 'space'), ['test', 'cluster.full'], {
    cwd: root,
    env: { ...process.env, SPACE_DRAIN_PARALLEL: String(p) },
    maxBuffer: 64 * 2 ** 20,
  });
  const found = /drained (\d+) session\(s\) off \S+ in (\d+) ms/.exec(stdout);
  if (!found) throw new Error(`the cluster test printed no drain time with SPACE_DRAIN_PARALLEL=${p}`);
  return { sessions: Number(found[1]), ms: Number(found[2]) };
}

const { results, rows, record } = recorder();
const serial = [];
const together = [];
let sessions = 0;
for (let round = 0; round < rounds; round++) {
  for (const [p, samples] of [
    [1, serial],
    [parallel, together],
  ]) {
    const drained = await drainMs(p);
    sessions = drained.sessions;
    samples.push(drained.ms);
    console.error(`round ${round + 1}: SPACE_DRAIN_PARALLEL=${p}: ${drained.sessions} sessions in ${drained.ms} ms`);
  }
}
record('floor: one at a time (SPACE_DRAIN_PARALLEL=1)', serial, 'ms');
record(`SPACE_DRAIN_PARALLEL=${parallel}`, together, 'ms');
const ratio = results[`SPACE_DRAIN_PARALLEL=${parallel}`].median / results['floor: one at a time (SPACE_DRAIN_PARALLEL=1)'].median;
console.log(`a drain of ${sessions} sessions, ${rounds} rounds`);
printTable(rows);
console.log(`${parallel} at a time take ${(ratio * 100).toFixed(0)}% of the time one at a time takes`);
console.log(JSON.stringify({ sessions, rounds, parallel, results, ratio }));
