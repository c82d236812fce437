// SPACE chaos run: busy sessions append acknowledged records while sandboxes and the whole platform
// are SIGKILLed at random moments; then every acknowledged record is accounted for against the live
// files and the checkpoints, and every session must answer. Bounded by its fault counts.
// Usage: node bench/chaos.mjs [SESSIONS=20] [SANDBOX_KILLS=1000] [PLATFORM_KILLS=20] [FAULT_INTERVAL_MS=1000] [SEED]
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runChaos } from '../packages/e2e/dist/harness/chaos.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const platformLogFile = process.env.SPACE_CHAOS_PLATFORM_LOG ?? '/tmp/space-chaos-platform.log';
const [sessions = 20, sandboxKills = 1000, platformKills = 20, faultIntervalMs = 1000, seed = Date.now() % 1e9] = process.argv.slice(2).map(Number);

// Interrupted, the run stops its faults, accounts for what it has and deletes its sessions.
const interrupted = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => interrupted.abort());

const report = await runChaos({
  signal: interrupted.signal,
  sessions,
  sandboxKills,
  platformKills,
  faultIntervalMs,
  seed,
  dataDir: process.env.SPACE_BENCH_DATA_DIR,
  log: (line) => process.stderr.write(`${line}\n`),
  platformLog: (text) => appendFileSync(platformLogFile, text),
});
const { accounts, ...summary } = report;
console.log(`\nchaos run, seed ${seed} (node bench/chaos.mjs ${sessions} ${sandboxKills} ${platformKills} ${faultIntervalMs} ${seed} replays its faults)`);
console.table({
  'sessions (answering at the end)': { value: `${report.sessions} (${report.sessionsAnswering})` },
  'sandbox SIGKILLs': { value: report.sandboxKills },
  'platform SIGKILLs': { value: report.platformKills },
  'records acknowledged': { value: report.acknowledged },
  'calls that failed (not acknowledged)': { value: report.failedCalls },
  checkpoints: { value: report.checkpoints },
  'acknowledged records missing from a later checkpoint': { value: report.missingFromCheckpoints },
  'acknowledged records lost (in no file, no checkpoint)': { value: report.lost },
  'records kept only in a checkpoint (rolled back by a resume)': { value: report.keptOnlyInCheckpoints },
  'resumes that rolled files back / largest rollback, s': { value: `${report.rollbacks} / ${(report.maxRollbackMs / 1000).toFixed(1)}` },
  'duration, s': { value: (report.durationMs / 1000).toFixed(0) },
});
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
writeFileSync(path.join(root, `bench/results/chaos-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), JSON.stringify(report, null, 2));
console.log(JSON.stringify({ chaos: summary }));
process.exitCode = report.lost || report.missingFromCheckpoints || report.sessionsAnswering < report.sessions ? 1 : 0;
