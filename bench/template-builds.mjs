// Dockerfile builds: a 5-step Dockerfile on `tiny` built cold (its first step changed each run, so
// nothing is cached) and again with only its last step changed (4 of 5 from the cache), against the
// baseline of the same five commands run by hand in one session with an fs checkpoint after each,
// in the same run. Also a template imported from an OCI image archive made here.
// Usage: node bench/template-builds.mjs [RUNS=8]   (writes bench/results/template-builds-<time>.json)
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, benchKey, startPlatform, timed } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = Number(process.argv[2] ?? 8);
const quiet = { checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 };
const steps = (first, last) => [
  `mkdir -p /opt && echo ${first} > /opt/one`,
  'mkdir -p /opt/app && echo two > /opt/app/two',
  'echo three >> /opt/app/two',
  'ls /opt > /opt/listing',
  `echo ${last} > /opt/last`,
];
const dockerfile = (first, last) =>
  `FROM tiny\n${steps(first, last)
    .map((s) => `RUN ${s}`)
    .join('\n')}\n`;

const { results, rows, record } = recorder();
const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0' });
const url = platform.url;
const key = benchKey;
const work = mkdtempSync(path.join(tmpdir(), 'space-bench-image-'));

/** Builds and waits for the end (the log followed to its last line). */
async function build(name, text) {
  const started = await api(url, 'POST', '/v1/templates', { name, dockerfile: text });
  const res = await fetch(`${url}/v1/templates/${name}/builds/${started.id}/logs?follow=1`, { headers: { authorization: `Bearer ${key}` } });
  const log = await res.text();
  if (!log.endsWith('--- build succeeded\n')) throw new Error(`build failed:\n${log}`);
}

try {
  const byHand = [];
  const cold = [];
  const cached = [];
  // Two rounds first, not measured: a fresh start of a data directory with many subvolumes keeps
  // btrfs busy (quota rescan, deletions) for the first minute, which is not what this measures.
  for (let i = -2; i < runs; i++) {
    if (i === 0) for (const list of [byHand, cold, cached]) list.length = 0;
    byHand.push(
      (
        await timed(async () => {
          const s = await api(url, 'POST', '/v1/sessions', { template: 'tiny', ...quiet });
          for (const cmd of steps(`hand-${i}`, 'last')) {
            const { exitCode } = await api(url, 'POST', `/v1/sessions/${s.id}/exec`, { cmd });
            if (exitCode !== 0) throw new Error(`${cmd} exited with ${exitCode}`);
            await api(url, 'POST', `/v1/sessions/${s.id}/checkpoints`, { kind: 'fs' });
          }
          await api(url, 'DELETE', `/v1/sessions/${s.id}`);
        })
      )[0],
    );
    cold.push((await timed(() => build('bench-build', dockerfile(`cold-${i}-${Date.now()}`, 'last'))))[0]);
    cached.push((await timed(() => build('bench-build', dockerfile('cached', `last-${i}-${Date.now()}`))))[0]);
  }
  record('5 commands by hand: session, exec + fs checkpoint each (baseline)', byHand);
  record('5-step Dockerfile build, cold', cold);
  record('5-step Dockerfile build, 4 of 5 steps cached', cached);

  // An image: busybox in an OCI layout tar, made with umoci.
  const layout = path.join(work, 'layout');
  const bundle = path.join(work, 'bundle');
  execFileSync('umoci', ['init', '--layout', layout]);
  execFileSync('umoci', ['new', '--image', `${layout}:v1`]);
  execFileSync('umoci', ['unpack', '--image', `${layout}:v1`, bundle]);
  mkdirSync(path.join(bundle, 'rootfs/bin'), { recursive: true });
  execFileSync('cp', ['/bin/busybox', path.join(bundle, 'rootfs/bin/busybox')]);
  execFileSync('ln', ['-s', 'busybox', path.join(bundle, 'rootfs/bin/sh')]);
  writeFileSync(path.join(bundle, 'rootfs/hello'), 'hi\n');
  execFileSync('umoci', ['repack', '--image', `${layout}:v1`, bundle]);
  execFileSync('tar', ['-cf', path.join(work, 'image.tar'), '-C', layout, '.']);
  const image = readFileSync(path.join(work, 'image.tar'));
  const imports = [];
  for (let i = 0; i < runs; i++)
    imports.push(
      (
        await timed(async () => {
          const res = await fetch(`${url}/v1/templates/bench-image/image`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: image });
          if (res.status !== 201) throw new Error(`import: ${res.status} ${await res.text()}`);
        })
      )[0],
    );
  record(`import an OCI image archive (busybox, ${(image.length / 1024 / 1024).toFixed(1)} MB)`, imports);
} finally {
  for (const name of ['bench-build', 'bench-image']) await api(url, 'DELETE', `/v1/templates/${name}?force=1`).catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
  await platform.stop();
}

printTable(rows);
const baseline = results['5 commands by hand: session, exec + fs checkpoint each (baseline)'].median;
const ratios = {
  cold: results['5-step Dockerfile build, cold'].median / baseline,
  cached: results['5-step Dockerfile build, 4 of 5 steps cached'].median / baseline,
};
console.log(`\nbuild / by hand: cold ${ratios.cold.toFixed(2)}x, cached ${ratios.cached.toFixed(2)}x (medians)`);
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
const file = path.join(root, `bench/results/template-builds-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ runs, results, ratios }, null, 2));
console.log(`JSON: ${file}`);
