// Where each path's time goes: runs the slow paths a few times on a platform whose log is read, and
// prints the median of every phase the node agent logs, and the P90 of each total (a cold start, a restore from a memory image,
// a full checkpoint's pause, also with 100 MB of user memory, an fs checkpoint: idle, right after a
// 100 MB upload, right after 500 MB of incompressible data were written, and while a process writes
// continuously), and the upload and write speeds. Settings such as SPACE_CHECKPOINT_COMPRESSION,
// SPACE_RUNSC_PLATFORM or SPACE_VOLUME_DIRTY_MB in the environment apply to both checkouts. With a
// second checkout named, profiles it first, on the same data directory, so before and after come
// from one run.
// Usage: node bench/profile.mjs [BEFORE_CHECKOUT]   (./space bench does not run it)
import path from 'node:path';
import { api, startPlatform, timed, transfer } from './harness.mjs';
import { summarize } from './stats.mjs';

const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const rounds = Number(process.env.SPACE_BENCH_ROUNDS ?? 5);
const before = process.argv[2] ? path.resolve(process.argv[2]) : null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The path a log line times, and its phases: `... in 312 ms (volume 3, network 40, runtime 200, agent 69)`. */
function phasesOf(line) {
  const kind = / ready in /.test(line)
    ? 'cold start'
    : / restored from the memory of /.test(line)
      ? 'restore from a full checkpoint'
      : / for a full checkpoint/.test(line)
        ? 'full checkpoint: sandbox paused'
        : /fs checkpoint /.test(line)
          ? 'fs checkpoint'
          : null;
  const m = /(\d+) ms \(([^)]*)\)/.exec(line);
  if (!kind || !m) return null;
  const phases = { total: Number(m[1]) };
  for (const part of m[2].split(', ')) {
    const [name, ms] = part.split(' ');
    phases[name] = Number(ms);
  }
  return { kind, phases };
}

const median = (xs) => summarize(xs).median;

async function profile(label, checkout) {
  const seen = {};
  let context = '';
  const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0' }, checkout, (line) => {
    const found = phasesOf(line);
    if (found) (seen[`${found.kind}${context}`] ??= []).push(found.phases);
  });
  try {
    for (let i = 0; i < rounds; i++) {
      const s = await api(platform.url, 'POST', '/v1/sessions', {
        template: 'tiny',
        checkpointIntervalSec: 0,
        fullCheckpointIntervalSec: 0,
        idleTimeoutSec: 0,
      });
      await api(platform.url, 'POST', `/v1/sessions/${s.id}/exec`, { cmd: 'sleep 600', background: true });
      await api(platform.url, 'POST', `/v1/sessions/${s.id}/checkpoints`, { kind: 'fs' });
      await api(platform.url, 'POST', `/v1/sessions/${s.id}/checkpoints`, { kind: 'full' });
      await api(platform.url, 'POST', `/v1/sessions/${s.id}/sandbox/kill`);
      await api(platform.url, 'POST', `/v1/sessions/${s.id}/exec`, { cmd: ['true'] });
      await api(platform.url, 'DELETE', `/v1/sessions/${s.id}`);
      await sleep(200);
    }
    const s = await api(platform.url, 'POST', '/v1/sessions', { template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    // Exec latency, and process-heavy work (the platform's weak spot: ptrace against systrap).
    const timedExec = async (cmd) => {
      const t = performance.now();
      await api(platform.url, 'POST', `/v1/sessions/${s.id}/exec`, { cmd });
      return performance.now() - t;
    };
    const execs = [];
    for (let i = 0; i < 30; i++) execs.push(await timedExec(['true']));
    const spawns = [];
    for (let i = 0; i < rounds; i++) spawns.push(await timedExec('i=0; while [ $i -lt 100 ]; do /bin/true; i=$((i+1)); done'));
    console.log(`${label}: exec \`true\` round trip: median ${median(execs).toFixed(1)} ms; 100 processes in one exec: median ${median(spawns).toFixed(0)} ms`);
    const uploads = [];
    for (let i = 0; i < rounds; i++) {
      const [ms] = await timed(() => transfer(platform.url, 'PUT', `/v1/sessions/${s.id}/files?path=/workspace/upload`, 100 * 2 ** 20));
      uploads.push(100 / (ms / 1000));
      context = ', right after a 100 MB upload';
      await api(platform.url, 'POST', `/v1/sessions/${s.id}/checkpoints`, { kind: 'fs' });
      context = '';
    }
    console.log(`${label}: upload of 100 MB: median ${median(uploads).toFixed(0)} MB/s`);
    // Incompressible, as most data is (the volume compresses with zstd: zeros would hardly reach the disk).
    await timedExec('head -c 100000000 /dev/urandom > /workspace/random');
    const writes = [];
    for (let i = 0; i < rounds; i++) {
      writes.push(await timedExec(`cat /workspace/random /workspace/random /workspace/random /workspace/random /workspace/random > /workspace/big-${i}`));
      context = ', right after 500 MB were written';
      await api(platform.url, 'POST', `/v1/sessions/${s.id}/checkpoints`, { kind: 'fs' });
      context = '';
      await api(platform.url, 'POST', `/v1/sessions/${s.id}/exec`, { cmd: `rm /workspace/big-${i}` });
    }
    await timedExec('rm /workspace/random');
    console.log(`${label}: writing 500 MB in one exec: median ${median(writes).toFixed(0)} ms`);
    await api(platform.url, 'POST', `/v1/sessions/${s.id}/exec`, {
      cmd: 'while true; do head -c 4000000 /dev/zero >> /workspace/stream; sleep 0.05; done',
      background: true,
      timeoutMs: 600_000,
    });
    await sleep(1000);
    context = ', while a process writes ~40 MB/s';
    for (let i = 0; i < rounds; i++) await api(platform.url, 'POST', `/v1/sessions/${s.id}/checkpoints`, { kind: 'fs' });
    context = '';
    await api(platform.url, 'DELETE', `/v1/sessions/${s.id}`);

    // A process holding 100 MB of incompressible memory.
    const big = await api(platform.url, 'POST', '/v1/sessions', {
      template: 'base',
      checkpointIntervalSec: 0,
      fullCheckpointIntervalSec: 0,
      idleTimeoutSec: 0,
    });
    await api(platform.url, 'POST', `/v1/sessions/${big.id}/exec`, {
      cmd: ['python3', '-c', 'import os, time\nb = os.urandom(100 * 2**20)\nopen("/tmp/ready", "w").close()\ntime.sleep(3600)'],
      background: true,
      timeoutMs: 3_600_000,
    });
    while ((await api(platform.url, 'POST', `/v1/sessions/${big.id}/exec`, { cmd: ['test', '-e', '/tmp/ready'] })).exitCode !== 0) await sleep(200);
    context = ', 100 MB of user memory';
    const pauses = [];
    const requests = [];
    let imageMb = 0;
    for (let i = 0; i < rounds; i++) {
      const [ms, checkpoint] = await timed(() => api(platform.url, 'POST', `/v1/sessions/${big.id}/checkpoints`, { kind: 'full' }));
      pauses.push(checkpoint.pauseMs);
      requests.push(ms);
      imageMb = checkpoint.sizeBytes / 2 ** 20;
    }
    const [paused, request] = [summarize(pauses), summarize(requests)];
    console.log(
      `${label}: full checkpoint with 100 MB of user memory (n=${rounds}): paused median ${paused.median} ms, P90 ${paused.p90}; ` +
        `the whole request median ${request.median.toFixed(0)} ms, P90 ${request.p90.toFixed(0)}; image ${imageMb.toFixed(1)} MB`,
    );
    await api(platform.url, 'POST', `/v1/sessions/${big.id}/sandbox/kill`);
    await api(platform.url, 'POST', `/v1/sessions/${big.id}/exec`, { cmd: ['true'] });
    context = '';
    await api(platform.url, 'DELETE', `/v1/sessions/${big.id}`);
  } finally {
    await platform.stop();
  }
  for (const [kind, list] of Object.entries(seen)) {
    const names = Object.keys(list[0]);
    const phases = names.map((n) => `${n} ${median(list.map((p) => p[n] ?? 0))}`).join(', ');
    console.log(`${label}: ${kind} (n=${list.length}, medians, ms): ${phases}; total P90 ${summarize(list.map((p) => p.total)).p90}`);
  }
}

if (before) await profile('before', before);
await profile(before ? 'after' : 'this checkout', path.resolve(path.dirname(new URL(import.meta.url).pathname), '..'));
