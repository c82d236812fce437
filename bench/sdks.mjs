// The SDKs side by side, in the same run: `node bench/sdks.mjs [--quick]` times an exec round trip
// and a create + first exec through raw HTTP (fetch), the TypeScript SDK and the Python SDK (Debian's
// Python, the SDK from packages/python/src), each against the same platform and session.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Space } from '../packages/sdk/dist/index.js';
import { api, benchKey, startPlatform, timed } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const quick = process.argv.includes('--quick');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const execRuns = quick ? 20 : 100;
const createRuns = quick ? 3 : 10;
const quiet = { template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 };
const { results, rows, record } = recorder();

/** The Python SDK's timings of the same calls, measured in its own process (milliseconds). */
function pythonTimings(url, sessionId) {
  const script = `
import json, sys, time
from space import Space
space = Space(sys.argv[1], sys.argv[2])
session = space.sessions.handle(sys.argv[3])
def ms(f):
    t = time.perf_counter(); f(); return (time.perf_counter() - t) * 1000
execs = [ms(lambda: session.exec(["true"])) for _ in range(int(sys.argv[4]))]
creates = []
for _ in range(int(sys.argv[5])):
    t = time.perf_counter()
    made = space.sessions.create(**json.loads(sys.argv[6]))
    made.exec(["true"])
    creates.append((time.perf_counter() - t) * 1000)
    made.delete()
print(json.dumps({"exec": execs, "create": creates}))
`;
  const out = execFileSync('/usr/bin/python3', ['-c', script, url, benchKey, sessionId, String(execRuns), String(createRuns), JSON.stringify(quiet)], {
    env: { ...process.env, PYTHONPATH: path.join(root, 'packages/python/src') },
    encoding: 'utf8',
  });
  return JSON.parse(out);
}

const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0' });
try {
  const space = new Space({ apiUrl: platform.url, apiKey: benchKey });
  const session = await space.sessions.create(quiet);
  await session.exec(['true']);
  const raw = [];
  const ts = [];
  for (let i = 0; i < execRuns; i++) {
    raw.push((await timed(() => api(platform.url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['true'] })))[0]);
    ts.push((await timed(() => session.exec(['true'])))[0]);
  }
  const py = pythonTimings(platform.url, session.id);
  record('exec `true`: raw HTTP (fetch)', raw);
  record('exec `true`: TypeScript SDK', ts);
  record('exec `true`: Python SDK', py.exec);

  const rawCreate = [];
  const tsCreate = [];
  for (let i = 0; i < createRuns; i++) {
    const [rawMs] = await timed(async () => {
      const made = await api(platform.url, 'POST', '/v1/sessions', quiet);
      await api(platform.url, 'POST', `/v1/sessions/${made.id}/exec`, { cmd: ['true'] });
      await api(platform.url, 'DELETE', `/v1/sessions/${made.id}`);
    });
    rawCreate.push(rawMs);
    let made;
    const [tsMs] = await timed(async () => {
      made = await space.sessions.create(quiet);
      await made.exec(['true']);
    });
    await made.delete();
    tsCreate.push(tsMs);
  }
  record('create tiny + first exec: raw HTTP (with its delete)', rawCreate);
  record('create tiny + first exec: TypeScript SDK', tsCreate);
  record('create tiny + first exec: Python SDK', py.create);
  await session.delete();
} finally {
  await platform.stop();
}

printTable(rows);
const ratio = (a, b) => results[a].median / results[b].median;
const ratios = {
  'exec, Python / raw HTTP': ratio('exec `true`: Python SDK', 'exec `true`: raw HTTP (fetch)'),
  'exec, TypeScript / raw HTTP': ratio('exec `true`: TypeScript SDK', 'exec `true`: raw HTTP (fetch)'),
};
for (const [name, value] of Object.entries(ratios)) console.log(`${name}: ${value.toFixed(2)}x (median)`);
const outDir = path.join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const file = path.join(outDir, `sdks-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ machine: { cpus: cpus().length, node: process.version }, results, ratios }, null, 2));
console.log(`JSON: ${file}`);
