// `npm install` in a sandbox through the egress gateway, with the gateway's DNS cache off
// (SPACE_GATEWAY_DNS_MAX_TTL=0: every connection resolves its host anew, as before the cache) and
// on (the default): `node bench/npm-install.mjs [--runs N] [--package SPEC]`.
//
// npm 10 (packed here from the registry: base's Node is Debian's 18, which npm 11 does not run on)
// installs the same tree each run into a fresh prefix with an empty npm cache, so every run fetches
// every packument and tarball from registry.npmjs.org through the gateway.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, benchKey, startPlatform } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argument = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const runs = Number(argument('--runs', '5'));
const spec = argument('--package', 'express@4.21.2');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';

const packDir = mkdtempSync(path.join(tmpdir(), 'space-npm-'));
execFileSync('npm', ['pack', 'npm@10.9.2', '--pack-destination', packDir, '--silent'], { stdio: ['ignore', 'ignore', 'inherit'] });
const tarball = readFileSync(
  path.join(
    packDir,
    readdirSync(packDir).find((f) => f.endsWith('.tgz')),
  ),
);
rmSync(packDir, { recursive: true, force: true });

async function upload(url, session, file, body) {
  const res = await fetch(`${url}/v1/sessions/${session}/files?path=${encodeURIComponent(file)}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${benchKey}` },
    body,
  });
  if (!res.ok) throw new Error(`upload ${file}: ${res.status} ${await res.text()}`);
}

async function exec(url, session, cmd, timeoutMs = 600_000) {
  const result = await api(url, 'POST', `/v1/sessions/${session}/exec`, { cmd, timeoutMs });
  if (result.exitCode !== 0) throw new Error(`${cmd.join(' ')} exited ${result.exitCode}: ${result.stderr.slice(-2000)}`);
  return result;
}

const { results, rows, record } = recorder();

// The same install on the host, straight to the registry (no sandbox, no gateway).
const hostInstalls = [];
for (let n = 0; n < runs; n++) {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-npm-host-'));
  const started = performance.now();
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--cache', path.join(dir, 'cache'), '--prefix', path.join(dir, 'p'), spec], { stdio: 'ignore' });
  hostInstalls.push((performance.now() - started) / 1000);
  rmSync(dir, { recursive: true, force: true });
}
record(`npm install ${spec} on the host (npm ${execFileSync('npm', ['--version']).toString().trim()}, Node ${process.version})`, hostInstalls, 's');
const series = [
  ['DNS cache off (SPACE_GATEWAY_DNS_MAX_TTL=0)', { SPACE_GATEWAY_DNS_MAX_TTL: '0' }],
  ['DNS cache on (default)', {}],
];
const durations = {};
for (const [label, env] of series) {
  const platform = await startPlatform(dataDir, env);
  try {
    const { id } = await api(platform.url, 'POST', '/v1/sessions', { template: 'base', resources: { memoryMb: 2048 } });
    try {
      await upload(platform.url, id, '/opt/npm.tgz', tarball);
      await exec(platform.url, id, ['sh', '-c', 'mkdir -p /opt/npm && tar -xzf /opt/npm.tgz -C /opt/npm --strip-components=1']);
      const npm = (n, flags) =>
        `node /opt/npm/bin/npm-cli.js install --loglevel http --no-audit --no-fund --no-update-notifier ${flags} --cache /tmp/npm-cache-${n} --prefix /workspace/p${n} ${spec}`;
      const install = (n) => ['sh', '-c', `${npm(n, '')} && ls /workspace/p${n}/node_modules | wc -l && rm -rf /workspace/p${n}`];
      // The floor: the same install again from the npm cache just filled (npm's own work, no network).
      const offline = (n) => ['sh', '-c', `${npm(n, '--offline')} && rm -rf /tmp/npm-cache-${n} /workspace/p${n}`];
      await exec(platform.url, id, install('warm'));
      await exec(platform.url, id, offline('warm'));
      const installs = [];
      const offlineInstalls = [];
      const fetches = [];
      let packages = '';
      for (let n = 0; n < runs; n++) {
        let started = performance.now();
        const { stdout, stderr } = await exec(platform.url, id, install(n));
        installs.push((performance.now() - started) / 1000);
        packages = stdout.trim().split('\n').at(-1);
        // npm's http log: "npm http fetch GET 200 https://registry.npmjs.org/express 123ms (cache miss)"
        for (const m of stderr.matchAll(/http fetch GET \d+ \S+ (\d+)ms/g)) fetches.push(Number(m[1]));
        started = performance.now();
        await exec(platform.url, id, offline(n));
        offlineInstalls.push((performance.now() - started) / 1000);
      }
      durations[label] = { installs, offlineInstalls, fetches };
      record(`npm install ${spec} (${packages} packages), ${label}`, installs, 's');
      record(`the same from npm's cache (--offline, the floor), ${label}`, offlineInstalls, 's');
      record(`one registry request during it, ${label}`, fetches);
      record(`registry requests over 4.5 s per install, ${label}`, [fetches.filter((ms) => ms > 4500).length / runs], 'requests');
    } finally {
      await api(platform.url, 'DELETE', `/v1/sessions/${id}`).catch(() => undefined);
    }
  } finally {
    await platform.stop();
  }
}
printTable(rows);
const outDir = path.join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const file = path.join(outDir, `npm-install-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ machine: { cpus: cpus().length, node: process.version }, spec, runs, results, durations, hostInstalls }, null, 2));
console.log(`JSON: ${file}`);
