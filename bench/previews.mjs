// Preview URLs, measured in one run on one `space up`:
// - a request to a server in the sandbox through the preview URL (control plane, node, sandbox
//   link) against the same request made from inside the sandbox (the baseline: no proxy);
// - wake on request: the sandbox killed, then a request to its service's port: time to the answer
//   (resume, service start, listen, answer).
// Usage: node bench/previews.mjs [RUNS=50] [WAKES=10]   (writes bench/results/previews-<time>.json)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, benchKey, startPlatform, timed, unattended } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = Number(process.argv[2] ?? 50);
const wakes = Number(process.argv[3] ?? 10);
const server = "require('http').createServer((q, r) => r.end('ok')).listen(8000)";
// Inside the sandbox: the same GET, `runs` times, each timed (ms, one per line).
const inside = `const http = require('http'); (async () => { for (let i = 0; i < ${runs}; i++) { const t = process.hrtime.bigint();
  await new Promise((ok) => http.get('http://127.0.0.1:8000/', (r) => { r.resume(); r.on('end', ok); }));
  console.log(Number(process.hrtime.bigint() - t) / 1e6); } })();`;

const { results, rows, record } = recorder();
const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0' });
try {
  const session = await api(platform.url, 'POST', '/v1/sessions', {
    template: 'base',
    ...unattended,
    services: [{ name: 'web', cmd: ['node', '-e', server], port: 8000 }],
  });
  const url = `${platform.url}/v1/sessions/${session.id}/ports/8000/`;
  const get = async () => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${benchKey}` } });
    if (res.status !== 200) throw new Error(`preview answered ${res.status}: ${await res.text()}`);
    await res.text();
  };
  await get(); // the service is up
  const proxied = [];
  for (let i = 0; i < runs; i++) proxied.push((await timed(get))[0]);
  const { stdout } = await api(platform.url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['node', '-e', inside] });
  record('GET through the preview URL', proxied);
  record('GET from inside the sandbox (baseline)', stdout.trim().split('\n').map(Number));
  const woken = [];
  for (let i = 0; i < wakes; i++) {
    await api(platform.url, 'POST', `/v1/sessions/${session.id}/sandbox/kill`);
    woken.push((await timed(get))[0]);
  }
  record('wake on request: killed sandbox to answer (resume, service start, answer)', woken);
  await api(platform.url, 'DELETE', `/v1/sessions/${session.id}`);
} finally {
  await platform.stop();
}
printTable(rows);
const ratio = results['GET through the preview URL'].median / results['GET from inside the sandbox (baseline)'].median;
console.log(`\npreview URL / inside the sandbox, median: ${ratio.toFixed(1)}x`);
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
const file = path.join(root, `bench/results/previews-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ runs, wakes, results }, null, 2));
console.log(`JSON: ${file}`);
