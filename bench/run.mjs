// SPACE benchmark: starts the platform on its own data directory, measures through the public
// HTTP API, and measures a cold `runsc run` of the same template in the same run as the baseline.
// Usage: ./space bench [--quick]   (writes bench/results/<time>.json and prints a table; ends with
// the API fuzzer, bench/fuzz.mjs). `./space bench --gigabyte` (bench/gigabyte.mjs) and `--burst`
// (bench/concurrent-creates.mjs) run one phase of their own instead.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { printTable, recorder } from './stats.mjs';
import { api, startPlatform, timed, transfer } from './harness.mjs';
import { measurePool, measureTemplateImages } from './pool-phase.mjs';
import { describeAddedLatency, measureGateway } from './gateway-phase.mjs';
import { runFuzz } from './fuzz.mjs';
import { bareRunsc, templateRootfs } from './runsc-floor.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const quick = process.argv.includes('--quick');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = {
  create: quick ? 5 : 20,
  exec: quick ? 30 : 200,
  baseline: quick ? 5 : 20,
  fileMb: 100,
  fileRuns: quick ? 1 : 3,
  checkpoints: quick ? 5 : 20,
  forks: quick ? 2 : 5,
  resumes: quick ? 3 : 10,
};
const poolSize = Number(process.env.SPACE_BENCH_POOL_SIZE ?? (quick ? 20 : 100));

/** Cold `runsc run` of a template's rootfs running `true`: what a sandbox costs without SPACE. */
function runscBaseline(template) {
  const bare = bareRunsc(templateRootfs(dataDir, template), ['/bin/true']);
  try {
    const samples = [];
    for (let i = 0; i < runs.baseline; i++) {
      samples.push(bare.runToEnd(`bench-${i}`));
      bare.delete(`bench-${i}`);
    }
    return samples;
  } finally {
    bare.dispose();
  }
}

/** Latencies of `runs.forks` forks of 4 sessions each from one checkpoint (the forks are deleted after). */
async function forkX4(url, checkpointId) {
  const samples = [];
  for (let i = 0; i < runs.forks; i++) {
    const [ms, forked] = await timed(() => api(url, 'POST', `/v1/checkpoints/${checkpointId}/fork`, { count: 4 }));
    samples.push(ms);
    for (const s of forked.sessions) await api(url, 'DELETE', `/v1/sessions/${s.id}`);
  }
  return samples;
}

// Cold paths first, with no warm pool and no template images (their boots would compete with what is measured).
const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0' });
const { results, rows, record } = recorder();

try {
  for (const template of ['tiny', 'base']) {
    const created = [];
    const createSamples = [];
    const firstExec = [];
    for (let i = 0; i < runs.create; i++) {
      const [ms, session] = await timed(() => api(platform.url, 'POST', '/v1/sessions', { template }));
      createSamples.push(ms);
      created.push(session.id);
      const [execMs] = await timed(() => api(platform.url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['true'] }));
      firstExec.push(ms + execMs);
    }
    record(`create ${template} (cold, sequential)`, createSamples);
    record(`create ${template} + first exec`, firstExec);
    for (const id of created) await api(platform.url, 'DELETE', `/v1/sessions/${id}`);
  }
  record('runsc run tiny `true` (baseline)', runscBaseline('tiny'));

  const session = await api(platform.url, 'POST', '/v1/sessions', { template: 'base' });
  const execSamples = [];
  for (let i = 0; i < runs.exec; i++) execSamples.push((await timed(() => api(platform.url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['true'] })))[0]);
  record('exec `true` round trip', execSamples);

  const bytes = runs.fileMb * 1024 * 1024;
  const up = [];
  const down = [];
  for (let i = 0; i < runs.fileRuns; i++) {
    up.push(runs.fileMb / ((await timed(() => transfer(platform.url, 'PUT', `/v1/sessions/${session.id}/files?path=bench.bin`, bytes)))[0] / 1000));
    down.push(runs.fileMb / ((await timed(() => transfer(platform.url, 'GET', `/v1/sessions/${session.id}/files?path=bench.bin`, bytes)))[0] / 1000));
  }
  record(`upload ${runs.fileMb} MB`, up, 'MB/s');
  record(`download ${runs.fileMb} MB`, down, 'MB/s');

  // Checkpoints of a base session holding the 100 MB file plus its template (~500 MB of files).
  const checkpointSamples = [];
  let lastCheckpoint;
  for (let i = 0; i < runs.checkpoints; i++) {
    const [ms, ckp] = await timed(() => api(platform.url, 'POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' }));
    checkpointSamples.push(ms);
    lastCheckpoint = ckp;
  }
  record('fs checkpoint (sync + btrfs snapshot)', checkpointSamples);

  record('fork x4 (4 running sessions)', await forkX4(platform.url, lastCheckpoint.id));

  const resumeSamples = [];
  for (let i = 0; i < runs.resumes; i++) {
    await api(platform.url, 'POST', `/v1/sessions/${session.id}/sandbox/kill`);
    resumeSamples.push((await timed(() => api(platform.url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['true'] })))[0]);
  }
  record('resume after kill (first exec)', resumeSamples);
  await api(platform.url, 'DELETE', `/v1/sessions/${session.id}`);

  // Full checkpoints of base sessions running a background process, each on a freshly booted sandbox.
  const fullLatency = [];
  const pauses = [];
  const sizes = [];
  const fullResumes = [];
  let lastFull;
  let forkSource;
  for (let i = 0; i < runs.checkpoints; i++) {
    const full = await api(platform.url, 'POST', '/v1/sessions', {
      template: 'base',
      checkpointIntervalSec: 0,
      fullCheckpointIntervalSec: 0,
      idleTimeoutSec: 0,
    });
    await api(platform.url, 'POST', `/v1/sessions/${full.id}/exec`, { cmd: 'sleep 100000', background: true });
    const [ms, ckp] = await timed(() => api(platform.url, 'POST', `/v1/sessions/${full.id}/checkpoints`, { kind: 'full' }));
    fullLatency.push(ms);
    pauses.push(ckp.pauseMs);
    sizes.push(ckp.sizeBytes / 1e6);
    if (i < runs.resumes) {
      await api(platform.url, 'POST', `/v1/sessions/${full.id}/sandbox/kill`);
      fullResumes.push((await timed(() => api(platform.url, 'POST', `/v1/sessions/${full.id}/exec`, { cmd: ['true'] })))[0]);
    }
    if (i === runs.checkpoints - 1) {
      lastFull = ckp;
      forkSource = full.id;
    } else await api(platform.url, 'DELETE', `/v1/sessions/${full.id}`);
  }
  record('full checkpoint (request)', fullLatency);
  record('full checkpoint: sandbox paused', pauses);
  record('full checkpoint: memory image', sizes, 'MB');
  record('resume after kill from full checkpoint (first exec)', fullResumes);
  record('fork x4 from full checkpoint (processes continue)', await forkX4(platform.url, lastFull.id));
  await api(platform.url, 'DELETE', `/v1/sessions/${forkSource}`);
} finally {
  await platform.stop();
}

// Then the warm pool: its own platform run, with a pool as large as the sequential series.
await measurePool({ dataDir, poolSize, record, concurrent: 20, execRuns: runs.exec });

// Snapshot preloading: no pool, base sessions restored from the template's memory image (cold boots above are the baseline).
await measureTemplateImages({ dataDir, record, runs: runs.create, coldToo: false });

// And the egress gateway: its own platform run, with an upstream on this host.
const gatewayAdded = describeAddedLatency(await measureGateway({ dataDir, record, requests: quick ? 30 : 200, downloadRuns: runs.fileRuns }));

printTable(rows);
console.log(`\n${gatewayAdded.join('\n')}`);
const ratio = results['create tiny (cold, sequential)'].median / results['runsc run tiny `true` (baseline)'].median;
const pooledRatio = results['create base from the warm pool + first exec (sequential)'].median / results['runsc run tiny `true` (baseline)'].median;
console.log(`\ncold create (tiny) / bare runsc run: ${ratio.toFixed(2)}x (median)`);
console.log(`pooled create base + first exec / bare runsc run: ${pooledRatio.toFixed(3)}x (median)`);
const imageRatio = results['create base, template image + first exec'].median / results['create base + first exec'].median;
console.log(`create base + first exec, from the template image / cold boot: ${imageRatio.toFixed(2)}x (median)`);
const outDir = path.join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const file = path.join(outDir, `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(
  file,
  JSON.stringify(
    {
      machine: { cpus: (await import('node:os')).cpus().length, node: process.version },
      runs,
      results,
      ratios: { createTinyVsRunsc: ratio, pooledCreateVsRunsc: pooledRatio, templateImageVsColdCreate: imageRatio },
      gatewayAdded,
    },
    null,
    2,
  ),
);
console.log(`JSON: ${file}`);

// Last, the API fuzzer on a platform of its own: 10,000 hostile requests (2,000 with --quick).
const fuzz = await runFuzz(quick ? 2000 : 10_000);
if (fuzz.serverErrors.length || fuzz.hung.length || !fuzz.healthyAfter) process.exitCode = 1;
