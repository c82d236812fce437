// The code interpreter, measured as a user runs it (default session settings, through the public
// API with the SDK): `node bench/code-interpreter.mjs [--quick]`. Each cell is set beside its floor
// in the same run: the same work as `exec python3 -c` in the same session.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Space } from '../packages/sdk/dist/index.js';
import { benchKey, startPlatform, timed } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const quick = process.argv.includes('--quick');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = quick ? 5 : 20;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const { results, rows, record } = recorder();

const platform = await startPlatform(dataDir, {
  SPACE_TEMPLATES: 'base,tiny,code-interpreter',
  SPACE_POOL_SIZE: '1',
  SPACE_POOL_TEMPLATES: 'code-interpreter',
  SPACE_POOL_REFILL_DELAY_MS: '0',
});
const space = new Space({ apiUrl: platform.url, apiKey: benchKey });
const sessions = [];
const created = async (options = {}) => {
  const session = await space.sessions.create({ template: 'code-interpreter', ...options });
  sessions.push(session);
  return session;
};
/** The newest full checkpoint taken after a cell (trigger auto), newer than `after`. */
const cellCheckpoint = async (session, after) => {
  for (let deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(100)) {
    const found = (await session.checkpoints()).filter((c) => c.kind === 'full' && c.trigger === 'auto' && !after.has(c.id)).at(-1);
    if (found) return found;
  }
  throw new Error('no checkpoint after the cell within 60 s');
};
const seen = async (session) => new Set((await session.checkpoints()).map((c) => c.id));

try {
  // A pooled sandbox whose kernel started while it waited: the first cell after create.
  const firstCell = [];
  const createOnly = [];
  for (let i = 0; i < Math.min(runs, 8); i++) {
    await waitForPool(platform.url);
    await sleep(8000); // the pooled sandbox's kernel starts after its agent is ready
    const [createMs, session] = await timed(() => created({ codeCheckpointDelayMs: 0 }));
    const [cellMs] = await timed(() => session.runCode('1 + 1'));
    createOnly.push(createMs);
    firstCell.push(createMs + cellMs);
  }
  record('create (pooled)', createOnly);
  record('create (pooled) + first cell', firstCell);

  const session = await created({ codeCheckpointDelayMs: 0 });
  await session.runCode('1');
  const cell = [];
  const exec = [];
  for (let i = 0; i < runs * 2; i++) {
    cell.push((await timed(() => session.runCode('1 + 1')))[0]);
    exec.push((await timed(() => session.exec(['python3', '-c', 'print(1 + 1)'])))[0]);
  }
  record('trivial cell `1 + 1`', cell);
  record('floor: exec python3 -c "print(1 + 1)"', exec);
  const chartCode = 'import matplotlib.pyplot as plt\nplt.plot(range(100))\nplt.show()';
  const chart = [];
  const chartExec = [];
  for (let i = 0; i < runs; i++) {
    chart.push((await timed(() => session.runCode(chartCode)))[0]);
    const script =
      'import matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt, io; plt.plot(range(100)); plt.savefig(io.BytesIO(), format="png")';
    chartExec.push((await timed(() => session.exec(['python3', '-c', script])))[0]);
  }
  record('chart cell (matplotlib PNG)', chart);
  record('floor: exec python3 -c (same chart to PNG)', chartExec);

  // Durable kernels, with default settings (codeCheckpointDelayMs 1000).
  const durable = await created();
  const killToCell = [];
  const pauses = { 100: [], 1000: [] };
  for (let i = 0; i < Math.min(runs, 5); i++) {
    const before = await seen(durable);
    await durable.runCode(`a = ${i}`);
    await cellCheckpoint(durable, before);
    const [ms, answer] = await timed(async () => {
      await durable.killSandbox();
      return durable.runCode('a');
    });
    if (answer.text !== String(i)) throw new Error(`after the kill, a is ${answer.text}, not ${i}`);
    killToCell.push(ms);
  }
  record('sandbox killed -> next cell answering (state kept)', killToCell);

  for (const mb of [100, 1000]) {
    const big = await created({ resources: { memoryMb: mb === 1000 ? 3072 : 1024 } });
    await big.runCode(`import numpy as np\nstate = np.ones(${mb} * 1024 * 1024 // 8)`);
    for (let i = 0; i < Math.min(runs, 3); i++) {
      const before = await seen(big);
      await big.runCode(`state[0] = ${i}`);
      pauses[mb].push((await cellCheckpoint(big, before)).pauseMs);
    }
    record(`pause of the cell checkpoint, kernel holding ${mb} MB`, pauses[mb]);
  }

  // Fork ×4 of a kernel with 100 MB of state, until every fork's kernel answers.
  const parent = await created();
  await parent.runCode('blob = bytearray(100 * 1024 * 1024)\nblob[0] = 7');
  const forkMs = [];
  for (let i = 0; i < Math.min(runs, 3); i++) {
    const before = await seen(parent);
    await parent.runCode(`blob[1] = ${i}`);
    const checkpoint = await cellCheckpoint(parent, before);
    const [ms, forks] = await timed(async () => {
      const made = await space.checkpoints.fork(checkpoint.id, { count: 4 });
      sessions.push(...made);
      const answers = await Promise.all(made.map((f) => f.runCode('blob[0], blob[1]')));
      if (answers.some((a) => a.text !== `(7, ${i})`)) throw new Error(`a fork lost the state: ${answers.map((a) => a.text)}`);
      return made;
    });
    forkMs.push(ms);
    for (const fork of forks) await fork.delete();
    sessions.splice(sessions.length - forks.length);
  }
  record('fork x4 of a 100 MB kernel, all answering', forkMs);
} finally {
  for (const s of sessions) await s.delete().catch(() => undefined);
  await platform.stop();
}

printTable(rows);
const ratio = (a, b) => results[a].median / results[b].median;
const ratios = {
  'trivial cell / exec python3 -c': ratio('trivial cell `1 + 1`', 'floor: exec python3 -c "print(1 + 1)"'),
  'chart cell / exec python3 -c': ratio('chart cell (matplotlib PNG)', 'floor: exec python3 -c (same chart to PNG)'),
};
for (const [name, value] of Object.entries(ratios)) console.log(`${name}: ${value.toFixed(2)}x (median)`);
const outDir = path.join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const file = path.join(outDir, `code-interpreter-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ machine: { cpus: cpus().length, node: process.version }, results, ratios }, null, 2));
console.log(`JSON: ${file}`);

async function waitForPool(url) {
  for (;;) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('space_pool_ready{template="code-interpreter"} '));
    if (Number(line?.split(' ')[1] ?? 0) >= 1) return;
    await sleep(250);
  }
}
