// The rollback window of `onResume: processes`: how much of a busy session's live files a kill
// takes back (to its newest full checkpoint). A SQLite writer in `base` commits a row every 10 ms;
// after a first full checkpoint, the sandbox is killed at seeded random moments and the rows it had
// acknowledged but the resumed volume lacks are counted. Run with the default share of pause (SPACE_FULL_CHECKPOINT_PAUSE_PERCENT
// 2) and, as the floor in the same run, with full checkpoints only at the 60 s interval (a share so
// small the busy schedule never comes sooner).
// Usage: node bench/rollback.mjs [--kills N] [--seed S]
import { cpus } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { rowsQuery, sqliteWriter } from '../packages/e2e/dist/harness/sqlite-writer.js';
import { api, startPlatform } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argument = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const kills = argument('--kills', 5);
let seed = argument('--seed', Date.now() % 1_000_000);
const firstSeed = seed;
/** Seconds to wait before each kill: 20–80, from a small LCG so a seed replays the run. */
const nextWait = () => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return 20 + (seed % 61);
};
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function measure(url, waits) {
  const { id } = await api(url, 'POST', '/v1/sessions', { template: 'base' });
  const exec = (cmd, extra = {}) => api(url, 'POST', `/v1/sessions/${id}/exec`, { cmd, ...extra });
  const counted = async (untilAt) => JSON.parse((await exec(['python3', '-c', rowsQuery(untilAt)])).stdout);
  try {
    await exec(['python3', '-c', sqliteWriter], { background: true });
    // A first full checkpoint, as an agent would take one: every kill then brings the writer back
    // (from the newest), and the maintenance plans the next ones from its pause.
    await sleep(1000);
    await api(url, 'POST', `/v1/sessions/${id}/checkpoints`, { kind: 'full' });
    const rolledBack = [];
    const lostRows = [];
    for (const waitSec of waits) {
      await sleep(waitSec * 1000);
      const [acknowledged, lastAt] = await counted();
      await api(url, 'POST', `/v1/sessions/${id}/sandbox/kill`);
      const [kept, keptUntil] = await counted(lastAt);
      rolledBack.push((lastAt - keptUntil) * 1000);
      lostRows.push(acknowledged - kept);
    }
    const fulls = (await api(url, 'GET', `/v1/sessions/${id}/checkpoints`)).checkpoints.filter((c) => c.kind === 'full');
    return { rolledBack, lostRows, pauses: fulls.map((c) => c.pauseMs), fullCheckpoints: fulls.length };
  } finally {
    await api(url, 'DELETE', `/v1/sessions/${id}`).catch(() => undefined);
  }
}

const waits = Array.from({ length: kills }, nextWait);
const { results, rows, record } = recorder();
const settings = { default: {}, 'interval only (floor)': { SPACE_FULL_CHECKPOINT_PAUSE_PERCENT: '0.0001' } };
const runs = {};
for (const [name, env] of Object.entries(settings)) {
  const platform = await startPlatform(dataDir, env);
  try {
    const run = await measure(platform.url, waits);
    runs[name] = run;
    record(`${name}: rolled back at a kill`, run.rolledBack);
    record(`${name}: acknowledged rows lost at a kill`, run.lostRows, 'rows');
    if (run.pauses.length) record(`${name}: full checkpoint pause`, run.pauses);
  } finally {
    await platform.stop();
  }
}
printTable(rows);
// Where a kill falls within the interval decides its rollback: the worst one is the bound, the median needs many kills.
const [withShare, floor] = ['default', 'interval only (floor)'].map((name) => results[`${name}: rolled back at a kill`]);
console.log(
  `\nkills after ${waits.join(', ')} s (seed ${firstSeed}); rollback, default / interval only: median ${(withShare.median / floor.median).toFixed(2)}x, worst ${(withShare.max / floor.max).toFixed(2)}x`,
);
const outDir = path.join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const file = path.join(outDir, `rollback-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ machine: { cpus: cpus().length, node: process.version }, seed: firstSeed, waits, results, runs }, null, 2));
console.log(`JSON: ${file}`);
