// Full checkpoints of sessions that hold a lot of memory: for each size, a `base` session whose one
// process holds that many MiB of random bytes; its full checkpoints (request, pause, image), resumes
// after a kill (first exec, the process checked alive), and forks x4 (each fork's first exec
// answered). Beside each size its floor in the same run: the same process under bare runsc
// (bench/runsc-floor.mjs), checkpointed to host memory and restored by hand. Last, a session near
// its limit (`--near-mb` of `--limit-mb`).
// Usage: ./space bench --gigabyte [--sizes 256,512,1024] [--runs 3] [--limit-mb 2048] [--near-mb 1700]
//        (writes bench/results/gigabyte-<time>.json)
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { api, startPlatform, timed, unattended, waitUntil } from './harness.mjs';
import { bareRunsc, templateRootfs } from './runsc-floor.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Holds `argv[1]` MiB of random bytes (each MiB a copy, so every page is its own), then says so in `argv[2]`. */
const filler = [
  'import os, sys, time',
  'block = os.urandom(1 << 20)',
  'held = [bytearray(block) for _ in range(int(sys.argv[1]))]',
  "open(sys.argv[2], 'w').close()",
  'time.sleep(1e9)',
].join('\n');
const fillerCmd = (mib, readyFile) => ['python3', '-c', filler, String(mib), readyFile];

const sessionOptions = (limitMb) => ({
  template: 'base',
  resources: { memoryMb: limitMb },
  ...unattended,
});

const exec = (url, id, cmd) => api(url, 'POST', `/v1/sessions/${id}/exec`, { cmd });
const fillerAlive = async (url, id) => (await exec(url, id, ['pgrep', '-f', 'bytearray'])).exitCode === 0;

/** A session of `limitMb` whose filler holds `mib`; resolves with its id once the memory is held. */
async function filledSession(url, mib, limitMb) {
  const session = await api(url, 'POST', '/v1/sessions', sessionOptions(limitMb));
  await api(url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: fillerCmd(mib, '/tmp/filled'), background: true });
  await waitUntil(async () => (await exec(url, session.id, ['test', '-e', '/tmp/filled'])).exitCode === 0, 120_000, `${mib} MiB not held`);
  return session.id;
}

/** SPACE's full checkpoint, resume and fork of a session holding `mib`. */
async function measureSpace(url, mib, limitMb, runs, record) {
  const label = `${mib} MiB`;
  const id = await filledSession(url, mib, limitMb);
  const requests = [];
  const pauses = [];
  const images = [];
  const resumes = [];
  let last;
  try {
    for (let i = 0; i < runs; i++) {
      const [ms, ckp] = await timed(() => api(url, 'POST', `/v1/sessions/${id}/checkpoints`, { kind: 'full' }));
      requests.push(ms);
      pauses.push(ckp.pauseMs);
      images.push(ckp.sizeBytes / 2 ** 20);
      last = ckp;
      await api(url, 'POST', `/v1/sessions/${id}/sandbox/kill`);
      resumes.push((await timed(() => exec(url, id, ['true'])))[0]);
      if (!(await fillerAlive(url, id))) throw new Error(`the ${label} process did not survive its resume`);
    }
    record(`${label}: full checkpoint (request)`, requests);
    record(`${label}: sandbox paused`, pauses);
    record(`${label}: memory image`, images, 'MiB');
    record(`${label}: resume after kill (first exec)`, resumes);
    const forks = [];
    for (let i = 0; i < runs; i++) {
      const [ms, forked] = await timed(async () => {
        const { sessions } = await api(url, 'POST', `/v1/checkpoints/${last.id}/fork`, { count: 4 });
        await Promise.all(sessions.map((s) => exec(url, s.id, ['true'])));
        return sessions;
      });
      forks.push(ms);
      for (const s of forked) await api(url, 'DELETE', `/v1/sessions/${s.id}`);
    }
    record(`${label}: fork x4, all answering`, forks);
  } finally {
    await api(url, 'DELETE', `/v1/sessions/${id}`);
  }
}

/** The same process under bare runsc: checkpointed into host memory (/dev/shm) and restored from it. */
async function measureFloor(dataDir, mib, runs, record) {
  const label = `${mib} MiB`;
  const bare = bareRunsc(templateRootfs(dataDir, 'base'), fillerCmd(mib, '/mnt/filled'));
  const images = mkdtempSync('/dev/shm/space-bench-images-');
  const checkpoints = [];
  const restores = [];
  try {
    bare.run('filled');
    await waitUntil(() => existsSync(path.join(bare.out, 'filled')), 120_000, 'the bare sandbox did not hold its memory');
    for (let i = 0; i < runs; i++) {
      const dir = path.join(images, String(i));
      checkpoints.push(bare.checkpoint('filled', dir));
      restores.push(bare.restore(`restored-${i}`, dir));
      bare.delete(`restored-${i}`);
      rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    bare.dispose();
    rmSync(images, { recursive: true, force: true });
  }
  record(`${label}: bare runsc checkpoint --leave-running (floor)`, checkpoints);
  record(`${label}: bare runsc restore (floor)`, restores);
}

/** A session holding `nearMb` of its `limitMb`: its full checkpoint taken, or refused at once with a clear error. */
async function measureNearLimit(url, nearMb, limitMb, record) {
  const id = await filledSession(url, nearMb, limitMb);
  try {
    const t = performance.now();
    const outcome = await api(url, 'POST', `/v1/sessions/${id}/checkpoints`, { kind: 'full' }).then(
      (ckp) => `taken, paused ${ckp.pauseMs} ms`,
      (err) => `refused: ${err.message}`,
    );
    record(`${nearMb} of ${limitMb} MiB: full checkpoint (request)`, [performance.now() - t]);
    return outcome;
  } finally {
    await api(url, 'DELETE', `/v1/sessions/${id}`);
  }
}

async function measureGigabyte({ dataDir, sizes, runs, limitMb, nearMb }) {
  const { results, rows, record } = recorder();
  const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0' });
  let nearLimit;
  try {
    for (const mib of sizes) {
      await measureSpace(platform.url, mib, limitMb, runs, record);
      await measureFloor(dataDir, mib, runs, record);
    }
    nearLimit = await measureNearLimit(platform.url, nearMb, limitMb, record);
  } finally {
    await platform.stop();
  }
  printTable(rows);
  console.log(`\n${nearMb} of ${limitMb} MiB: ${nearLimit}`);
  return { results, nearLimit };
}

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '256,512,1024' },
    runs: { type: 'string', default: '3' },
    'limit-mb': { type: 'string', default: '2048' },
    'near-mb': { type: 'string', default: '1700' },
  },
});
const options = {
  dataDir: process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test',
  sizes: values.sizes.split(',').map(Number),
  runs: Number(values.runs),
  limitMb: Number(values['limit-mb']),
  nearMb: Number(values['near-mb']),
};
const measured = await measureGigabyte(options);
const outDir = path.join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const file = path.join(outDir, `gigabyte-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ options, ...measured }, null, 2));
console.log(`JSON: ${file}`);
