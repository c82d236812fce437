// What every benchmark phase shares: a platform started on its own data directory, and timed calls
// to its public API.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** `--name N` among a bench's arguments, as a number; `fallback` when absent. */
export function numberOption(args, name, fallback) {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
}

/** Session settings for what a bench measures: no automatic checkpoints, no idle stop in between. */
export const unattended = { checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 };

export const benchKey = `bench-${process.pid}-0123456789abcdef`;

/** A benchmark is one tenant doing what many would: the per-tenant limits would measure themselves (20 concurrent creates > 16). */
const benchLimits = {
  SPACE_TENANT_MAX_CONCURRENT_CREATES: '1000',
  SPACE_TENANT_REQUESTS_PER_SEC: '100000',
  SPACE_TENANT_MAX_SESSIONS: '10000',
  SPACE_TENANT_MAX_REQUESTS: '10000',
  SPACE_TENANT_MAX_STREAMS: '10000',
};

/**
 * Starts `space up` on `dataDir`; `checkout` is the SPACE tree to run (this one unless another is
 * named). With `onLogLine`, the platform logs everything and each line of its log goes there.
 */
export async function startPlatform(dataDir, env = {}, checkout = root, onLogLine = null) {
  const child = spawn(process.execPath, [path.join(checkout, 'packages/cli/dist/main.js'), 'up'], {
    env: { ...process.env, ...benchLimits, SPACE_DATA_DIR: dataDir, SPACE_PORT: '0', SPACE_API_KEY: benchKey, SPACE_QUIET: onLogLine ? '0' : '1', ...env },
    stdio: ['ignore', 'pipe', onLogLine ? 'pipe' : 'inherit'],
  });
  if (onLogLine) {
    let pending = '';
    child.stderr.on('data', (d) => {
      const lines = (pending + d).split('\n');
      pending = lines.pop();
      for (const line of lines) onLogLine(line);
    });
  }
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /SPACE is up: (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`platform exited ${code}`)));
  });
  return { url, pid: child.pid, stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))) };
}

/** CPU time the whole host has spent busy so far, all cores, and its total (busy + idle), in ms (from /proc/stat). */
export function hostCpuMs() {
  const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
  const msPerTick = 10; // USER_HZ
  const total = fields.reduce((x, y) => x + y, 0) * msPerTick;
  return { busy: total - (fields[3] + fields[4]) * msPerTick, total };
}

export async function api(url, method, p, body) {
  const res = await fetch(url + p, {
    method,
    headers: { authorization: `Bearer ${benchKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = res.headers.get('content-type')?.includes('json') ? await res.json() : await res.text();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** A value from the platform's /metrics, e.g. `space_pool_ready{template="base"}`; NaN when the series is absent. */
export async function metric(url, name) {
  const text = await api(url, 'GET', '/metrics');
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.slice(name.length + 1) ?? Number.NaN);
}

/** Polls `check` every 200 ms until it holds; throws `${what} within …` after `timeoutMs`. */
export async function waitUntil(check, timeoutMs, what) {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`${what} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export async function timed(fn) {
  const t = performance.now();
  const value = await fn();
  return [performance.now() - t, value];
}

/**
 * `execs` round trips of `exec true` on a fresh platform (`env` added to its settings, `checkout` the
 * tree to run) with one `tiny` session, after 10 warm-up execs; milliseconds each.
 */
export async function execRoundTrips(dataDir, env, execs, checkout = root) {
  return (await sessionRoundTrips(dataDir, env, { execs }, checkout)).exec;
}

/**
 * `execRoundTrips` with more: the session's `cpus` (default 1) and, with `transferMb`, three uploads
 * and downloads of that many MB through the files API (MB/s each) after the execs.
 */
export async function sessionRoundTrips(dataDir, env, { execs, cpus = 1, transferMb = 0 }, checkout = root) {
  const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0', ...env }, checkout);
  try {
    const session = await api(platform.url, 'POST', '/v1/sessions', { template: 'tiny', resources: { cpus }, ...unattended });
    const sessionPath = `/v1/sessions/${session.id}`;
    const exec = () => api(platform.url, 'POST', `${sessionPath}/exec`, { cmd: ['true'] });
    for (let i = 0; i < 10; i++) await exec();
    const samples = { exec: [], upload: [], download: [] };
    for (let i = 0; i < execs; i++) samples.exec.push((await timed(exec))[0]);
    const bytes = transferMb * 2 ** 20;
    const filePath = `${sessionPath}/files?path=/workspace/transfer.bin`;
    for (let i = 0; i < (transferMb > 0 ? 3 : 0); i++) {
      samples.upload.push(bytes / 1e3 / (await timed(() => transfer(platform.url, 'PUT', filePath, bytes)))[0]);
      samples.download.push(bytes / 1e3 / (await timed(() => transfer(platform.url, 'GET', filePath, 0)))[0]);
    }
    await api(platform.url, 'DELETE', sessionPath);
    return samples;
  } finally {
    await platform.stop();
  }
}

/** Streams `bytes` up (PUT) or reads them down (GET) through the files API; resolves with the bytes received. */
export function transfer(url, method, p, bytes) {
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(p, url),
      { method, headers: { authorization: `Bearer ${benchKey}`, ...(method === 'PUT' ? { 'content-length': bytes } : {}) } },
      (res) => {
        let received = 0;
        res.on('data', (d) => (received += d.length));
        res.on('end', () => (res.statusCode === 200 ? resolve(received) : reject(new Error(`${method} ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
    if (method === 'PUT') {
      const chunk = Buffer.alloc(1024 * 1024, 7);
      let sent = 0;
      const pump = () => {
        while (sent < bytes) {
          sent += chunk.length;
          if (!req.write(chunk)) return req.once('drain', pump);
        }
        req.end();
      };
      pump();
    } else req.end();
  });
}
