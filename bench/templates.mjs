// Templates from checkpoints: how long making one takes (from a checkpoint, and from a session,
// which takes an fs checkpoint first), and creating a session (+ first exec) from a custom template
// against the same from the built-in it was made of, both cold (no warm pool), in the same run.
// Usage: node bench/templates.mjs [RUNS=20]   (writes bench/results/templates-<time>.json)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, startPlatform, timed } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = Number(process.argv[2] ?? 20);
const quiet = { checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 };

const { results, rows, record } = recorder();
const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0' });
const url = platform.url;
const made = [];
try {
  const source = await api(url, 'POST', '/v1/sessions', { template: 'tiny', ...quiet });
  made.push(source.id);
  // An environment worth keeping: 20 MB of files.
  await api(url, 'POST', `/v1/sessions/${source.id}/exec`, { cmd: 'mkdir -p /opt/env && dd if=/dev/urandom of=/opt/env/blob bs=1M count=20 2>/dev/null' });
  const checkpoint = await api(url, 'POST', `/v1/sessions/${source.id}/checkpoints`, { kind: 'fs' });

  const fromCheckpoint = [];
  const fromSession = [];
  for (let i = 0; i < runs; i++) {
    fromCheckpoint.push((await timed(() => api(url, 'POST', '/v1/templates', { name: 'bench-env', fromCheckpoint: checkpoint.id })))[0]);
    fromSession.push((await timed(() => api(url, 'POST', '/v1/templates', { name: 'bench-env', fromSession: source.id })))[0]);
  }
  record('template from a checkpoint', fromCheckpoint);
  record('template from a session (fs checkpoint + template)', fromSession);

  const createAndExec = async (template) => {
    const [ms, session] = await timed(async () => {
      const s = await api(url, 'POST', '/v1/sessions', { template, ...quiet });
      await api(url, 'POST', `/v1/sessions/${s.id}/exec`, { cmd: ['true'] });
      return s;
    });
    made.push(session.id);
    return ms;
  };
  const builtIn = [];
  const custom = [];
  // Alternated, so both see the same machine.
  for (let i = 0; i < runs; i++) {
    builtIn.push(await createAndExec('tiny'));
    custom.push(await createAndExec('bench-env'));
  }
  record('create tiny + first exec, cold (baseline)', builtIn);
  record('create from the custom template + first exec, cold', custom);
} finally {
  for (const id of made) await api(url, 'DELETE', `/v1/sessions/${id}`).catch(() => undefined);
  await api(url, 'DELETE', '/v1/templates/bench-env?force=1').catch(() => undefined);
  await platform.stop();
}

printTable(rows);
const ratio = results['create from the custom template + first exec, cold'].median / results['create tiny + first exec, cold (baseline)'].median;
console.log(`\ncreate from a custom template / from its built-in: ${ratio.toFixed(2)}x (median)`);
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
const file = path.join(root, `bench/results/templates-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ runs, results, ratio }, null, 2));
console.log(`JSON: ${file}`);
