// SPACE chaos run: busy sessions append acknowledged records while sandboxes and the platform's
// processes are SIGKILLed at random moments; then every acknowledged record is accounted for against
// the live files and the checkpoints, and every session must answer. Bounded by its fault counts.
// Usage: node bench/chaos.mjs [SESSIONS=20] [SANDBOX_KILLS=1000] [PLATFORM_KILLS=20] [FAULT_INTERVAL_MS=1000] [SEED]
//        node bench/chaos.mjs --cluster [SESSIONS=6] [SANDBOX_KILLS=100] [NODE_KILLS=10] [CONTROL_PLANE_KILLS=10] [FAULT_INTERVAL_MS=2000] [SEED] [PARTITIONS=5]
//   (--cluster: PostgreSQL, two control planes, three node agents and a loopback S3 server on this machine;
//    a partition cuts one node off from every control plane with iptables for 3-8 s)
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runChaos } from '../packages/e2e/dist/harness/chaos.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const platformLogFile = process.env.SPACE_CHAOS_PLATFORM_LOG ?? '/tmp/space-chaos-platform.log';
const cluster = process.argv[2] === '--cluster';
const args = process.argv.slice(cluster ? 3 : 2).map(Number);
const seedOr = (value) => value ?? Date.now() % 1e9;
const plan = cluster
  ? (([sessions = 6, sandbox = 100, node = 10, controlPlane = 10, interval = 2000, seed, partition = 5]) => ({
      sessions,
      faults: { sandbox, node, controlPlane, partition },
      faultIntervalMs: interval,
      seed: seedOr(seed),
    }))(args)
  : (([sessions = 20, sandbox = 1000, platform = 20, interval = 1000, seed]) => ({
      sessions,
      faults: { sandbox, platform },
      faultIntervalMs: interval,
      seed: seedOr(seed),
    }))(args);

// Interrupted, the run stops its faults, accounts for what it has and deletes its sessions.
const interrupted = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => interrupted.abort());

const report = await runChaos({
  ...plan,
  cluster,
  signal: interrupted.signal,
  dataDir: process.env.SPACE_BENCH_DATA_DIR,
  log: (line) => process.stderr.write(`${line}\n`),
  platformLog: (text) => appendFileSync(platformLogFile, text),
});
const { accounts, ...summary } = report;
const replay = ['node bench/chaos.mjs', ...(cluster ? ['--cluster'] : []), plan.sessions, ...Object.values(plan.faults), plan.faultIntervalMs, plan.seed].join(
  ' ',
);
console.log(`\nchaos run${cluster ? ' on a cluster' : ''}, seed ${plan.seed} (${replay} replays its faults)`);
console.table({
  'sessions (answering at the end)': { value: `${report.sessions} (${report.sessionsAnswering})` },
  ...Object.fromEntries(Object.entries(report.faults).map(([kind, landed]) => [`${kind} SIGKILLs landed (of ${plan.faults[kind]})`, { value: landed }])),
  'records acknowledged': { value: report.acknowledged },
  'calls that failed (not acknowledged)': { value: report.failedCalls },
  'calls stuck past 60 s': { value: report.stuckCalls.length },
  'checkpoints (not found on any node)': { value: `${report.checkpoints} (${report.unreadableCheckpoints})` },
  'acknowledged records missing from a later checkpoint': { value: report.missingFromCheckpoints },
  'acknowledged records lost (in no file, no checkpoint)': { value: report.lost },
  'records kept only in a checkpoint (rolled back by a resume)': { value: report.keptOnlyInCheckpoints },
  'resumes that rolled files back / largest rollback, s': { value: `${report.rollbacks} / ${(report.maxRollbackMs / 1000).toFixed(1)}` },
  ...(cluster
    ? {
        'records left on a lost node (after its newest shipped checkpoint)': { value: report.leftOnLostNodes },
        'largest window a node loss left behind, s': { value: (report.maxNodeLossWindowMs / 1000).toFixed(1) },
      }
    : {}),
  'duration, s': { value: (report.durationMs / 1000).toFixed(0) },
});
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
writeFileSync(
  path.join(root, `bench/results/chaos-${cluster ? 'cluster-' : ''}${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
  JSON.stringify(report, null, 2),
);
console.log(JSON.stringify({ chaos: summary }));
process.exitCode = report.lost || report.missingFromCheckpoints || report.sessionsAnswering < report.sessions ? 1 : 0;
