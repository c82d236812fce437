// A diff of two checkpoints against the size of the volume: one small file changed between them in
// volumes holding 100 MB, 1 GB and 5 GB (files of 100 MB of random data), each diff timed `runs`
// times. btrfs's change tracking walks only what differs, so the time should not grow with the
// volume: the 100 MB volume is the floor the others are compared with, in the same run.
// Usage: node bench/checkpoint-diff.mjs [RUNS=20] [SIZES_MB=100,1000,5000]   (writes bench/results/checkpoint-diff-<time>.json)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, startPlatform, timed } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = Number(process.argv[2] ?? 20);
const sizesMb = (process.argv[3] ?? '100,1000,5000').split(',').map(Number);

const { results, rows, record } = recorder();
const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0' });
try {
  for (const sizeMb of sizesMb) {
    const session = await api(platform.url, 'POST', '/v1/sessions', {
      template: 'tiny',
      checkpointIntervalSec: 0,
      fullCheckpointIntervalSec: 0,
      idleTimeoutSec: 0,
      resources: { diskGb: Math.ceil(sizeMb / 1000) + 2 },
    });
    const sessionPath = `/v1/sessions/${session.id}`;
    const exec = (cmd) => api(platform.url, 'POST', `${sessionPath}/exec`, { cmd, timeoutMs: 600_000 });
    await exec(
      `mkdir -p /workspace/data && for i in $(seq 1 ${Math.ceil(sizeMb / 100)}); do head -c 104857600 /dev/urandom > /workspace/data/f$i; done; echo one > /workspace/notes.txt`,
    );
    const from = (await api(platform.url, 'POST', `${sessionPath}/checkpoints`, { kind: 'fs' })).id;
    await exec('echo two >> /workspace/notes.txt');
    const to = (await api(platform.url, 'POST', `${sessionPath}/checkpoints`, { kind: 'fs' })).id;
    const samples = [];
    let entries = 0;
    for (let i = 0; i < runs; i++) {
      const [ms, diff] = await timed(() => api(platform.url, 'GET', `/v1/checkpoints/${from}/diff?to=${to}`));
      samples.push(ms);
      entries = diff.entries.filter((e) => e.path.startsWith('/workspace/')).length;
    }
    record(`diff, one file changed, volume of ${sizeMb} MB`, samples);
    console.log(`${sizeMb} MB: ${entries} change(s) under /workspace`);
    await api(platform.url, 'DELETE', sessionPath);
  }
} finally {
  await platform.stop();
}
printTable(rows);
const floor = results[`diff, one file changed, volume of ${sizesMb[0]} MB`].median;
for (const sizeMb of sizesMb.slice(1))
  console.log(`${sizeMb} MB / ${sizesMb[0]} MB, median: ${(results[`diff, one file changed, volume of ${sizeMb} MB`].median / floor).toFixed(2)}x`);
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
const file = path.join(root, `bench/results/checkpoint-diff-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ runs, sizesMb, results }, null, 2));
console.log(`JSON: ${file}`);
