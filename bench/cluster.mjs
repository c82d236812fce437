// A cluster on this machine (PostgreSQL, 2 control planes, 3 node agents, loopback S3) against a
// single `space up` (SQLite, one process) measured in the same run:
// - create + first exec, alternating control planes, against the same on `space up`;
// - an fs checkpoint call with shipping on, against the same on `space up` (nothing shipped), and
//   how long until it is shipped; shipping throughput for a checkpoint with 64 MB of new data;
// - node loss: time from a node agent's SIGKILL to its loss being seen, and from then to a moved
//   session answering exec (fetch from the object store, restore, sandbox start).
// Usage: node bench/cluster.mjs [RUNS=20] [LOSSES=5]   (writes bench/results/cluster-<time>.json)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { smallCluster } from '../packages/e2e/dist/harness/small-cluster.js';
import { benchKey, startPlatform, timed } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = Number(process.argv[2] ?? 20);
const losses = Number(process.argv[3] ?? 5);
const quiet = { template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 };
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function call(url, method, p, body) {
  const res = await fetch(url + p, {
    method,
    headers: { authorization: `Bearer ${benchKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const { results, rows, record } = recorder();

/** Creates + first exec and fs checkpoint calls on the control planes at `urls` (alternating). */
async function measure(label, urls) {
  const creates = [];
  const checkpoints = [];
  const made = [];
  for (let i = 0; i < runs; i++) {
    const url = urls[i % urls.length];
    const [ms, session] = await timed(async () => {
      const s = await call(url, 'POST', '/v1/sessions', quiet);
      await call(url, 'POST', `/v1/sessions/${s.id}/exec`, { cmd: ['true'] });
      return s;
    });
    creates.push(ms);
    made.push([url, session.id]);
    await call(url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['sh', '-c', 'echo data > /tmp/f'] });
    checkpoints.push((await timed(() => call(url, 'POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' })))[0]);
  }
  record(`create + first exec, ${label}`, creates);
  record(`fs checkpoint call, ${label}`, checkpoints);
  return made;
}

// Baseline: one process, SQLite, no object store.
const single = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0' });
try {
  for (const [url, id] of await measure('space up (baseline)', [single.url])) await call(url, 'DELETE', `/v1/sessions/${id}`);
} finally {
  await single.stop();
}

const cluster = await smallCluster({ dataDir: `${dataDir}-bench-cluster`, adminKey: benchKey });
const detect = [];
const move = [];
const shipWait = [];
let throughput = null;
try {
  await cluster.start();
  const [a, b] = cluster.controlPlaneUrls;
  const made = await measure('cluster, 2 control planes, 3 nodes, shipping on', [a, b]);
  // Until each of those checkpoints is shipped (they were taken one after another above).
  for (const [url, id] of made) {
    const started = performance.now();
    while (!(await call(url, 'GET', `/v1/sessions/${id}/checkpoints`)).checkpoints.every((c) => c.shippedAt)) await pause(20);
    shipWait.push(performance.now() - started);
  }
  // Throughput: 64 MB of new data in one checkpoint.
  const big = await call(a, 'POST', '/v1/sessions', quiet);
  await call(a, 'POST', `/v1/sessions/${big.id}/exec`, { cmd: ['sh', '-c', 'dd if=/dev/urandom of=/tmp/big bs=1M count=64 2>/dev/null'] });
  const shipStart = performance.now();
  await call(a, 'POST', `/v1/sessions/${big.id}/checkpoints`, { kind: 'fs' });
  while (!(await call(a, 'GET', `/v1/sessions/${big.id}/checkpoints`)).checkpoints.every((c) => c.shippedAt)) await pause(20);
  throughput = { mb: 64, ms: performance.now() - shipStart };
  throughput.mbPerSec = throughput.mb / (throughput.ms / 1000);
  made.push([a, big.id]);

  for (let round = 0; round < losses; round++) {
    const victim = cluster.nodeNames[round % cluster.nodeNames.length];
    let session;
    do {
      session = await call(a, 'POST', '/v1/sessions', quiet);
      made.push([a, session.id]);
    } while (session.nodeId !== victim);
    await call(a, 'POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' });
    while (!(await call(a, 'GET', `/v1/sessions/${session.id}/checkpoints`)).checkpoints.every((c) => c.shippedAt)) await pause(20);
    const killed = performance.now();
    cluster.member(victim).process.kill('SIGKILL');
    while ((await call(b, 'GET', '/v1/nodes')).nodes.find((n) => n.id === victim).status !== 'lost') await pause(50);
    const seen = performance.now();
    await call(b, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['true'] });
    detect.push(seen - killed);
    move.push(performance.now() - seen);
    await cluster.startNode(victim);
    while ((await call(a, 'GET', '/v1/nodes')).nodes.find((n) => n.id === victim).status !== 'ready') await pause(50);
  }
  for (const [url, id] of made) await call(url, 'DELETE', `/v1/sessions/${id}`).catch(() => undefined);
} finally {
  await cluster.stop();
}
record('checkpoint shipped, after its call returned', shipWait);
record('node loss: SIGKILL to lost (SPACE_NODE_LOST_AFTER_SEC=3, heartbeat 500 ms)', detect);
record('node loss: lost to the moved session answering exec', move);

printTable(rows);
const ratio = (name) => results[`${name}, cluster, 2 control planes, 3 nodes, shipping on`].median / results[`${name}, space up (baseline)`].median;
console.log(
  `\ncluster / space up, median: create + first exec ${ratio('create + first exec').toFixed(2)}x, fs checkpoint call ${ratio('fs checkpoint call').toFixed(2)}x`,
);
console.log(`shipping throughput: ${throughput.mb} MB in ${Math.round(throughput.ms)} ms (${throughput.mbPerSec.toFixed(1)} MB/s, checkpoint call included)`);
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
const file = path.join(root, `bench/results/cluster-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ runs, losses, results, throughput }, null, 2));
console.log(`JSON: ${file}`);
