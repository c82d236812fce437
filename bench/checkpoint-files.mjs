// A checkpoint's files read without a sandbox, measured in one run on one `space up`:
// - a 100 MB file read from a checkpoint, against the same file read from the live session (the
//   floor: the agent in the sandbox serves it) and against a `cat` of it inside the sandbox;
// - a small file's stat from a checkpoint against the live session's;
// - the history of one path over 50 checkpoints (one node asked once for all 50);
// - a 100 MB file restored from a checkpoint into the live session, against an upload of 100 MB.
// Usage: node bench/checkpoint-files.mjs [RUNS=20]   (writes bench/results/checkpoint-files-<time>.json)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, startPlatform, timed, transfer, unattended } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = Number(process.argv[2] ?? 20);
const checkpointCount = 50;
const bigBytes = 100 * 1024 * 1024;

const { results, rows, record } = recorder();
const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0' });
try {
  const session = await api(platform.url, 'POST', '/v1/sessions', {
    template: 'base',
    ...unattended,
    resources: { diskGb: 2 },
  });
  const sessionPath = `/v1/sessions/${session.id}`;
  const exec = (cmd) => api(platform.url, 'POST', `${sessionPath}/exec`, { cmd });
  await exec(`head -c ${bigBytes} /dev/urandom > /workspace/big.bin && echo v0 > /workspace/notes.txt`);
  const checkpoints = [];
  for (let i = 0; i < checkpointCount; i++) {
    // Every fifth checkpoint changes the file whose history is read.
    if (i % 5 === 4) await exec(`echo v${i} >> /workspace/notes.txt`);
    checkpoints.push((await api(platform.url, 'POST', `${sessionPath}/checkpoints`, { kind: 'fs' })).id);
  }
  const newest = checkpoints.at(-1);
  const series = async (name, fn, unit = 'ms') => {
    const samples = [];
    for (let i = 0; i < runs; i++) samples.push((await timed(fn))[0]);
    record(name, samples, unit);
  };
  const read = (p) => async () => {
    if ((await transfer(platform.url, 'GET', p, 0)) !== bigBytes) throw new Error(`${p}: short read`);
  };
  await series('read 100 MB from a checkpoint (no sandbox)', read(`/v1/checkpoints/${newest}/files?path=/workspace/big.bin`));
  await series('read 100 MB from the live session (floor: the agent serves it)', read(`${sessionPath}/files?path=/workspace/big.bin`));
  await series('stat from a checkpoint', () => api(platform.url, 'GET', `/v1/checkpoints/${newest}/files/stat?path=/workspace/notes.txt`));
  await series('stat from the live session (floor)', () => api(platform.url, 'GET', `${sessionPath}/files/stat?path=/workspace/notes.txt`));
  let changes = 0;
  await series(`history of a path over ${checkpointCount} checkpoints`, async () => {
    const history = await api(platform.url, 'GET', `${sessionPath}/files/history?path=/workspace/notes.txt`);
    changes = history.versions.filter((v) => v.change === 'modified').length;
  });
  await series(`history of an unchanged 100 MB file over ${checkpointCount} checkpoints (hashed once)`, () =>
    api(platform.url, 'GET', `${sessionPath}/files/history?path=/workspace/big.bin`),
  );
  console.log(`history found ${changes} modifications of /workspace/notes.txt (${checkpointCount / 5} made)`);
  // Restoring one path writes it through the sandbox and takes an fs checkpoint first: against an upload of the same bytes.
  const restores = [];
  const uploads = [];
  for (let i = 0; i < Math.min(runs, 10); i++) {
    restores.push(
      (
        await timed(() =>
          api(platform.url, 'POST', `${sessionPath}/files/restore`, { checkpointId: newest, path: '/workspace/big.bin', to: '/workspace/restored.bin' }),
        )
      )[0],
    );
    uploads.push((await timed(() => transfer(platform.url, 'PUT', `${sessionPath}/files?path=/workspace/uploaded.bin`, bigBytes)))[0]);
  }
  record('restore a 100 MB file from a checkpoint (an fs checkpoint first, then the copy)', restores);
  record('floor: upload 100 MB into the live session', uploads);
  await api(platform.url, 'DELETE', sessionPath);
} finally {
  await platform.stop();
}
printTable(rows);
const ratio = results['read 100 MB from a checkpoint (no sandbox)'].median / results['read 100 MB from the live session (floor: the agent serves it)'].median;
console.log(`\n100 MB from a checkpoint / from the live session, median: ${ratio.toFixed(2)}x`);
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
const file = path.join(root, `bench/results/checkpoint-files-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ runs, checkpointCount, results }, null, 2));
console.log(`JSON: ${file}`);
