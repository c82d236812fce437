// Egress gateway phase of the benchmark: latency a request gains by going through the gateway (HTTP
// and HTTPS, new and reused connections), and 100 MB download throughput. Measured from inside a
// sandbox, against an upstream on this host; the baseline is the same request from the same sandbox
// straight to the upstream, through a firewall hole this phase opens for the sandbox's link and
// closes again.
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, benchKey, startPlatform } from './harness.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { TestUpstream } = await import(path.join(root, 'packages/e2e/dist/test-upstream.js'));

/** Runs inside the sandbox (Debian's Node.js): timed requests, printed as JSON. */
const probe = `
const http = require('node:http'), https = require('node:https'), fs = require('node:fs');
const [mode, url, count, servername] = process.argv.slice(2);
const ca = servername ? fs.readFileSync('/tmp/bench-ca.crt') : undefined;
const reuse = mode.startsWith('reuse');
const agent = url.startsWith('https') ? new https.Agent({ keepAlive: reuse, maxSockets: 1, ...(servername ? { ca, servername } : {}) }) : new http.Agent({ keepAlive: reuse, maxSockets: 1 });
const get = () => new Promise((resolve, reject) => {
  const t = performance.now();
  (url.startsWith('https') ? https : http).get(url, { agent, headers: process.env.BENCH_SECRET ? { authorization: 'Bearer ' + process.env.BENCH_SECRET } : {} }, (res) => {
    let bytes = 0;
    res.on('data', (c) => (bytes += c.length));
    res.on('end', () => (res.statusCode === 200 ? resolve({ ms: performance.now() - t, bytes }) : reject(new Error(url + ': ' + res.statusCode))));
  }).on('error', reject);
});
(async () => {
  const samples = [];
  await get(); // warm-up: DNS, certificate issue, upstream connection pool
  for (let i = 0; i < Number(count); i++) samples.push(await get());
  console.log(JSON.stringify(samples));
})().catch((e) => { console.error(e.message); process.exit(1); });
`;

export async function measureGateway({ dataDir, record, requests, downloadRuns }) {
  const upstream = new TestUpstream(['api.bench.space', 'plain.bench.space'], '0.0.0.0');
  await upstream.start();
  const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', ...upstream.platformEnv() });
  let hole = null;
  try {
    await api(platform.url, 'PUT', '/v1/secrets/BENCH_SECRET', { value: 'bench-secret-value-0123456789', hosts: ['api.bench.space'] });
    // Two sessions: one without secrets (nothing to swap or mask), one using a secret.
    const plain = await api(platform.url, 'POST', '/v1/sessions', { template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    const secret = await api(platform.url, 'POST', '/v1/sessions', {
      template: 'base',
      secrets: ['BENCH_SECRET'],
      checkpointIntervalSec: 0,
      fullCheckpointIntervalSec: 0,
    });
    const sandboxRecord = JSON.parse(execFileSync('cat', [path.join(dataDir, 'node/sandboxes', plain.sandbox.id, 'record.json')], { encoding: 'utf8' }));
    const hostIp = sandboxRecord.sandboxIp.replace(/\d+$/, (n) => String(Number(n) - 1));
    const hostIf = `sp${plain.sandbox.id.replace(/^sbx_/, '').slice(0, 10)}`;
    hole = ['INPUT', '-i', hostIf, '-p', 'tcp', '-m', 'multiport', '--dports', `${upstream.httpPort},${upstream.httpsPort}`, '-j', 'ACCEPT'];
    execFileSync('iptables', ['-w', '-I', ...hole]);
    const upload = async (sessionId, file, body) => {
      const res = await fetch(`${platform.url}/v1/sessions/${sessionId}/files?path=${file}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${benchKey}` },
        body,
      });
      if (!res.ok) throw new Error(`upload of ${file}: ${res.status}`);
    };
    for (const s of [plain, secret]) {
      await upload(s.id, '/tmp/bench-probe.js', probe);
      await upload(s.id, '/tmp/bench-ca.crt', execFileSync('cat', [upstream.caFile]));
    }
    const runIn = async (sessionId, mode, url, count, servername = '') => {
      const r = await api(platform.url, 'POST', `/v1/sessions/${sessionId}/exec`, {
        cmd: ['node', '/tmp/bench-probe.js', mode, url, String(count), servername],
        timeoutMs: 600_000,
      });
      if (r.exitCode !== 0) throw new Error(`probe ${mode} ${url}: ${r.stderr}`);
      return JSON.parse(r.stdout);
    };
    const run = (mode, url, count, servername = '') => runIn(plain.id, mode, url, count, servername);
    const direct = { http: `http://${hostIp}:${upstream.httpPort}`, https: `https://${hostIp}:${upstream.httpsPort}` };
    const viaGateway = { http: 'http://plain.bench.space', https: 'https://api.bench.space' };
    const medians = {};
    for (const scheme of ['http', 'https']) {
      for (const mode of ['new', 'reuse']) {
        const servername = scheme === 'https' ? 'api.bench.space' : '';
        const base = (await run(mode, `${direct[scheme]}/echo`, requests, servername)).map((s) => s.ms);
        const gw = (await run(mode, `${viaGateway[scheme]}/echo`, requests)).map((s) => s.ms);
        const label = `${scheme.toUpperCase()} request, ${mode === 'new' ? 'new connection' : 'reused connection'}`;
        record(`gateway: ${label}, direct (baseline)`, base);
        record(`gateway: ${label}, through the gateway`, gw);
        medians[label] = { direct: median(base), gateway: median(gw) };
      }
    }
    const withSecret = (await runIn(secret.id, 'reuse', `${viaGateway.https}/echo`, requests)).map((s) => s.ms);
    record('gateway: HTTPS request, reused connection, secret injected + echo masked', withSecret);
    const mb = 100;
    const bytes = mb * 1024 * 1024;
    const throughput = async (url, servername = '', sessionId = plain.id) => {
      const out = [];
      for (let i = 0; i < downloadRuns; i++) {
        const [s] = await runIn(sessionId, 'reuse', `${url}/bytes?n=${bytes}`, 1, servername);
        if (s.bytes !== bytes) throw new Error(`download of ${url}: ${s.bytes} bytes`);
        out.push(mb / (s.ms / 1000));
      }
      return out;
    };
    record(`gateway: download ${mb} MB over HTTP, direct (baseline)`, await throughput(direct.http), 'MB/s');
    record(`gateway: download ${mb} MB over HTTP, through the gateway`, await throughput(viaGateway.http), 'MB/s');
    record(`gateway: download ${mb} MB over HTTPS, direct (baseline)`, await throughput(direct.https, 'api.bench.space'), 'MB/s');
    record(`gateway: download ${mb} MB over HTTPS, through the gateway`, await throughput(viaGateway.https), 'MB/s');
    record(`gateway: download ${mb} MB over HTTPS, through the gateway, response masking on`, await throughput(viaGateway.https, '', secret.id), 'MB/s');
    for (const s of [plain, secret]) await api(platform.url, 'DELETE', `/v1/sessions/${s.id}`);
    await api(platform.url, 'DELETE', '/v1/secrets/BENCH_SECRET');
    return medians;
  } finally {
    // Deleting the session removed every rule of its link already, this one included.
    if (hole) spawnSync('iptables', ['-w', '-D', ...hole], { stdio: 'ignore' });
    await platform.stop();
    await upstream.stop();
  }
}

function median(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/** What the gateway adds to each median, as the closing lines of the table print it. */
export function describeAddedLatency(medians) {
  return Object.entries(medians).map(
    ([label, m]) =>
      `${label}: +${(m.gateway - m.direct).toFixed(2)} ms through the gateway (${m.direct.toFixed(2)} -> ${m.gateway.toFixed(2)} ms, ${(m.gateway / m.direct).toFixed(2)}x)`,
  );
}
