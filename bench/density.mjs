// How many idle sessions one node holds, and what an active session's exec latency is meanwhile.
// Sessions of `tiny` (256 MiB each, no checkpoints, no idle stop) are created in steps up to --max,
// the node offering placement far beyond the host's memory (SPACE_NODE_MEMORY_MB), so that the
// host itself is what is measured. After each step, with nothing else going on: the host memory the
// idle sandboxes take (MemAvailable), the host's CPU while they idle (10 s of /proc/stat; the
// platform's process and the sandboxes' cgroups apart), and
// --execs sequential execs of `true` in one active session, median / P90 / P99, against the same
// execs with no idle session (the floor, measured first in the same run). Stops early when the
// host's available memory falls under --reserve-mb or a create fails, and says which.
// Prints a table; the JSON goes to bench/results (or --json file).
// With --checkpoints the sessions keep the default automatic checkpoints (fs every 60 s when their
// files changed; still no idle stop), each step waits until their first ones are taken, and the
// host's CPU is read over 60 s (a whole round of maintenance's looks), the platform's with the
// commands it ran (btrfs, runsc), and the looks' outcome counted (/metrics).
// Usage: ./space script bench/density.mjs [--max 1000] [--step 250] [--execs 300] [--reserve-mb 3072] [--concurrency 3]
//   [--checkpoints] [--json file]
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, hostCpuMs, metric, numberOption, startPlatform, timed, unattended, waitUntil } from './harness.mjs';
import { processUse } from './scale/processes.mjs';
import { printTable, summarize } from './stats.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => numberOption(args, name, fallback);
const max = option('--max', 1000);
const step = option('--step', 250);
const execs = option('--execs', 300);
const reserveMb = option('--reserve-mb', 3072);
const concurrency = option('--concurrency', 3);
const checkpoints = args.includes('--checkpoints');
/** Seconds of CPU reading per step. */
const windowSec = checkpoints ? 60 : 10;
const jsonAt = args.indexOf('--json');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const poolSize = 2;

/** MB of host memory available (the kernel's estimate: free memory plus what it can reclaim). */
const availableMb = () => Number(/^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) / 1024;

/** The share of the host's CPUs busy over `ms` (from /proc/stat), 0..1. */
async function hostBusy(ms) {
  const a = hostCpuMs();
  await sleep(ms);
  const b = hostCpuMs();
  return (b.busy - a.busy) / (b.total - a.total);
}

/** CPU seconds charged so far to the cgroups of all the node's sandboxes (their parent, `space`: cgroup v1 or v2). */
function sandboxesCpuSeconds() {
  const read = (file) => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return null;
    }
  };
  const v1 = read('/sys/fs/cgroup/cpuacct/space/cpuacct.usage');
  if (v1 !== null) return Number(v1) / 1e9;
  return Number(/^usage_usec (\d+)$/m.exec(read('/sys/fs/cgroup/space/cpu.stat') ?? '')?.[1] ?? 0) / 1e6;
}

const platform = await startPlatform(dataDir, {
  // Placement counts each session's memoryMb against what the node offers: offer far more than the host has.
  SPACE_NODE_MEMORY_MB: '1000000',
  SPACE_POOL_TEMPLATES: 'tiny',
  SPACE_POOL_SIZE: String(poolSize),
  // No demand-driven boots between the steps.
  SPACE_POOL_MAX_MEMORY_MB: '0',
});
const session = () =>
  api(platform.url, 'POST', '/v1/sessions', { template: 'tiny', resources: { memoryMb: 256 }, ...(checkpoints ? { idleTimeoutSec: 0 } : unattended) });
/** The platform's CPU seconds so far, with the commands it ran and waited for. */
const platformCpuSec = () => {
  const use = processUse(platform.pid);
  return use.cpuSec + use.childrenCpuSec;
};
const counters = ['space_checkpoints_total', 'space_checkpoints_skipped_unchanged_total', 'space_checkpoints_skipped_quiet_total'];
/** The maintenance's checkpoint counters now (a counter this build does not have reads as 0). */
const checkpointCounters = async () => {
  const text = await (await fetch(`${platform.url}/metrics`)).text();
  return Object.fromEntries(
    counters.map((name) => [
      name,
      text
        .split('\n')
        .filter((line) => line.startsWith(`${name} `) || line.startsWith(`${name}{`))
        .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0),
    ]),
  );
};
/** Every session the bench made, deleted at the end whatever happens. */
const made = [];
const idle = [];
const levels = [];
let stopped = null;
try {
  const active = await session();
  made.push(active.id);
  const execLatencies = async () => {
    const samples = [];
    for (let i = 0; i < execs; i++) samples.push((await timed(() => api(platform.url, 'POST', `/v1/sessions/${active.id}/exec`, { cmd: ['true'] })))[0]);
    return summarize(samples);
  };
  const measure = async (createMs) => {
    // The pool refilled and the last creates' writes settled: nothing but the idle sandboxes runs.
    await waitUntil(async () => (await metric(platform.url, 'space_pool_ready{template="tiny"}')) >= poolSize, 120_000, 'the pool refilled');
    // With checkpoints: until the newest sessions' first automatic ones (60 s after their start) are taken.
    await sleep(checkpoints ? 70_000 : 3000);
    const platformBefore = platformCpuSec();
    const sandboxesCpuBefore = sandboxesCpuSeconds();
    const countersBefore = checkpoints ? await checkpointCounters() : null;
    const busy = await hostBusy(windowSec * 1000);
    const platformCpu = (platformCpuSec() - platformBefore) / windowSec;
    const sandboxesCpu = (sandboxesCpuSeconds() - sandboxesCpuBefore) / windowSec;
    const countersAfter = checkpoints ? await checkpointCounters() : null;
    const level = {
      idle: idle.length,
      availableMb: Math.round(availableMb()),
      hostBusy: Math.round(busy * 1000) / 10,
      platformCpu: Math.round(platformCpu * 1000) / 10,
      sandboxesCpu: Math.round(sandboxesCpu * 1000) / 10,
      create: createMs.length ? summarize(createMs) : null,
      // Over the window: automatic checkpoints taken, skipped as unchanged, and of those skipped from the node's list.
      looks: countersAfter ? Object.fromEntries(counters.map((name) => [name, countersAfter[name] - countersBefore[name]])) : null,
      exec: await execLatencies(),
    };
    levels.push(level);
    console.log(
      `${level.idle} idle: ${level.availableMb} MB available, host CPU ${level.hostBusy}% busy (platform ${level.platformCpu}%, sandboxes ${level.sandboxesCpu}% of a core), exec median ${level.exec.median.toFixed(1)} / P99 ${level.exec.p99.toFixed(1)} ms${level.looks ? `; in ${windowSec} s: ${JSON.stringify(level.looks)}` : ''}`,
    );
  };
  await measure([]);
  const startMb = levels[0].availableMb;
  while (idle.length < max && !stopped) {
    const createMs = [];
    const target = Math.min(max, idle.length + step);
    let started = idle.length;
    const worker = async () => {
      while (started < target && !stopped) {
        if (availableMb() < reserveMb) {
          stopped = `host memory available fell under ${reserveMb} MB`;
          return;
        }
        started++;
        try {
          const [ms, created] = await timed(session);
          made.push(created.id);
          idle.push(created.id);
          createMs.push(ms);
        } catch (err) {
          stopped = `a create failed: ${err.message.slice(0, 300)}`;
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    await measure(createMs);
  }
  const last = levels.at(-1);
  const perSandboxMb = last.idle ? (startMb - last.availableMb) / last.idle : 0;
  const rows = levels.map((l) => ({ name: `${l.idle} idle: exec of an active session`, ...l.exec, unit: 'ms' }));
  printTable(rows);
  if (perSandboxMb > 0)
    console.log(
      `\nper idle sandbox: ${perSandboxMb.toFixed(1)} MB of host memory (${startMb} MB available with none, ${last.availableMb} MB with ${last.idle}); ` +
        `at that rate ${Math.floor((startMb - reserveMb) / perSandboxMb)} idle sandboxes fit above a ${reserveMb} MB reserve`,
    );
  console.log(
    `exec P99 with ${last.idle} idle / with none: ${last.exec.p99.toFixed(1)} / ${levels[0].exec.p99.toFixed(1)} ms (${(last.exec.p99 / levels[0].exec.p99).toFixed(2)}x)`,
  );
  if (stopped) console.log(`stopped at ${idle.length}: ${stopped}`);
  const report = { options: { max, step, execs, reserveMb, concurrency, checkpoints }, perSandboxMb, stopped, levels };
  const file = jsonAt >= 0 ? args[jsonAt + 1] : path.join(root, 'bench/results', `density-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`JSON: ${file}`);
} finally {
  // A few at a time.
  const ids = [...made];
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let id = ids.pop(); id; id = ids.pop()) await api(platform.url, 'DELETE', `/v1/sessions/${id}`).catch(() => undefined);
    }),
  );
  await platform.stop();
}
