// What every benchmark phase shares: a platform started on its own data directory, and timed calls
// to its public API.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const benchKey = `bench-${process.pid}-0123456789abcdef`;

/**
 * Starts `space up` on `dataDir`; `checkout` is the SPACE tree to run (this one unless another is
 * named). With `onLogLine`, the platform logs everything and each line of its log goes there.
 */
export async function startPlatform(dataDir, env = {}, checkout = root, onLogLine = null) {
  const child = spawn(process.execPath, [path.join(checkout, 'packages/cli/dist/main.js'), 'up'], {
    env: { ...process.env, SPACE_DATA_DIR: dataDir, SPACE_PORT: '0', SPACE_API_KEY: benchKey, SPACE_QUIET: onLogLine ? '0' : '1', ...env },
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

export async function timed(fn) {
  const t = performance.now();
  const value = await fn();
  return [performance.now() - t, value];
}
