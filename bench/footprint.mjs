// What an idle sandbox costs: host memory of its runsc processes (Sentry and gofer, RSS and PSS)
// per ready pooled sandbox, the memory the kernel charges to its cgroup (those processes, the
// ptrace stubs and kernel memory, without the runsc binary all sandboxes share), and the in-sandbox
// agent's own memory as the sandbox sees it, and the CPU an idle sandbox uses (its cgroup's, over
// 10 s: nothing in or around it should poll). With a second checkout named, measures both, one after the other on the same data directory, so an
// agent or runtime change is compared within one run.
// Usage: node bench/footprint.mjs [BEFORE_CHECKOUT]   (./space bench does not run it)
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readCgroupUsage } from '../packages/node/dist/runtime/cgroup-usage.js';
import { api, startPlatform } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const poolSize = Number(process.env.SPACE_BENCH_POOL_SIZE ?? 8);
const before = process.argv[2] ? path.resolve(process.argv[2]) : null;

/** kB of `field` (VmRSS, Pss, ...) in a /proc status-like text. */
const kb = (text, field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);

/** RSS and PSS (MB) of every runsc sandbox and gofer process on the host. */
function runscMemory() {
  let rss = 0;
  let pss = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!/^runsc-(sandbox|gofer)\0/.test(cmd)) continue;
      rss += kb(readFileSync(`/proc/${pid}/status`, 'utf8'), 'VmRSS');
      pss += kb(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'), 'Pss');
    } catch {
      // The process ended while being read.
    }
  }
  return { rss: rss / 1024, pss: pss / 1024 };
}

function runningSandboxes() {
  return execFileSync('runsc', [`--root=${path.join(dataDir, 'node/runsc')}`, 'list', '--quiet'], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
}

/** MB charged to each running sandbox's cgroup. */
async function cgroupMemory() {
  const usage = await Promise.all(runningSandboxes().map((id) => readCgroupUsage(id)));
  return usage.filter(Boolean).map((u) => u.memoryBytes / 2 ** 20);
}

/** Each running sandbox's CPU over 10 s, in % of one core. */
async function idleCpuPercent() {
  const ids = runningSandboxes();
  const first = await Promise.all(ids.map((id) => readCgroupUsage(id)));
  const started = Date.now();
  await new Promise((r) => setTimeout(r, 10_000));
  const second = await Promise.all(ids.map((id) => readCgroupUsage(id)));
  const seconds = (Date.now() - started) / 1000;
  return ids.flatMap((_, i) => (first[i] && second[i] ? [((second[i].cpuNanos - first[i].cpuNanos) / 1e9 / seconds) * 100] : []));
}

async function measure(label, checkout, record) {
  const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: String(poolSize), SPACE_POOL_TEMPLATES: 'tiny', SPACE_TEMPLATE_IMAGES: '0' }, checkout);
  try {
    const deadline = Date.now() + 120_000;
    while (runningSandboxes().length < poolSize && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
    await new Promise((r) => setTimeout(r, 5000)); // let the last refills settle
    const sandboxes = runningSandboxes().length;
    const perSandbox = [];
    const perSandboxPss = [];
    for (let i = 0; i < 5; i++) {
      const { rss, pss } = runscMemory();
      perSandbox.push(rss / sandboxes);
      perSandboxPss.push(pss / sandboxes);
      await new Promise((r) => setTimeout(r, 1000));
    }
    record(`${label}: host RSS per idle sandbox (Sentry + gofer)`, perSandbox, 'MB');
    record(`${label}: host PSS per idle sandbox (Sentry + gofer)`, perSandboxPss, 'MB');
    record(`${label}: memory charged to an idle sandbox's cgroup`, await cgroupMemory(), 'MB');
    record(`${label}: CPU of an idle sandbox (its cgroup, over 10 s)`, await idleCpuPercent(), '% of a core');
    // The agent is PID 2, under init; its memory as the sandbox's kernel accounts it.
    const session = await api(platform.url, 'POST', '/v1/sessions', {
      template: 'tiny',
      checkpointIntervalSec: 0,
      fullCheckpointIntervalSec: 0,
      idleTimeoutSec: 0,
    });
    const status = await api(platform.url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['cat', '/proc/2/status'] });
    record(`${label}: agent RSS inside the sandbox`, [kb(status.stdout, 'VmRSS') / 1024], 'MB');
    await api(platform.url, 'DELETE', `/v1/sessions/${session.id}`);
  } finally {
    await platform.stop();
  }
}

const { record, rows } = recorder();
if (before) await measure('before', before, record);
await measure(before ? 'after' : 'this checkout', root, record);
printTable(rows);
