// The E2B-compatible API against SPACE's own, in the same run on the same platform (`space up`,
// default warm pool), alternating so both meet the same pool and machine state:
// - create + first command: the unmodified `e2b` SDK (`Sandbox.create` + `commands.run`, which goes
//   through the control API, then envd's Connect-RPC Start) against SPACE's SDK (`sessions.create`
//   + `exec`), both running `/bin/bash -l -c true` (what E2B's `commands.run` runs);
// - one command on a running sandbox, each way;
// - a 1 MB file written and read back, each way.
// Usage: node bench/e2b.mjs [RUNS=20]   (writes bench/results/e2b-<time>.json)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Sandbox } from 'e2b';
import { Space } from '../packages/sdk/dist/index.js';
import { benchKey, startPlatform, timed } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = Number(process.argv[2] ?? 20);
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const command = ['/bin/bash', '-l', '-c', 'true'];
const payload = Buffer.alloc(1024 * 1024, 'x');

const { results, rows, record } = recorder();
const platform = await startPlatform(dataDir);
const samples = { e2bCreate: [], spaceCreate: [], e2bExec: [], spaceExec: [], e2bFile: [], spaceFile: [] };
try {
  const e2b = { apiKey: benchKey, apiUrl: `${platform.url}/e2b`, sandboxUrl: `${platform.url}/e2b/sandbox` };
  const space = new Space({ apiUrl: platform.url, apiKey: benchKey });
  for (let i = 0; i < runs; i++) {
    const [createMs, sandbox] = await timed(async () => {
      const s = await Sandbox.create('base', e2b);
      await s.commands.run('true');
      return s;
    });
    samples.e2bCreate.push(createMs);
    samples.e2bExec.push((await timed(() => sandbox.commands.run('true')))[0]);
    samples.e2bFile.push(
      (
        await timed(async () => {
          await sandbox.files.write('/tmp/payload', payload);
          await sandbox.files.read('/tmp/payload', { format: 'bytes' });
        })
      )[0],
    );
    await sandbox.kill();
    await pause(200);

    const [spaceMs, session] = await timed(async () => {
      const s = await space.sessions.create({ template: 'base' });
      await s.exec(command);
      return s;
    });
    samples.spaceCreate.push(spaceMs);
    samples.spaceExec.push((await timed(() => session.exec(command)))[0]);
    samples.spaceFile.push(
      (
        await timed(async () => {
          await session.files.write('/tmp/payload', payload);
          await session.files.read('/tmp/payload');
        })
      )[0],
    );
    await session.delete();
    await pause(200);
  }
} finally {
  await platform.stop();
}
record('create + first command, e2b SDK via /e2b', samples.e2bCreate);
record('create + first command, SPACE SDK', samples.spaceCreate);
record('command on a running sandbox, e2b SDK', samples.e2bExec);
record('command on a running sandbox, SPACE SDK', samples.spaceExec);
record('1 MB written and read back, e2b SDK', samples.e2bFile);
record('1 MB written and read back, SPACE SDK', samples.spaceFile);
printTable(rows);
const ratio = (what) => results[`${what}, e2b SDK${what.startsWith('create') ? ' via /e2b' : ''}`].median / results[`${what}, SPACE SDK`].median;
console.log(
  `\ne2b / SPACE SDK, median: create + first command ${ratio('create + first command').toFixed(2)}x, command ${ratio('command on a running sandbox').toFixed(2)}x, 1 MB file ${ratio('1 MB written and read back').toFixed(2)}x`,
);
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
const file = path.join(root, `bench/results/e2b-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ runs, results }, null, 2));
console.log(`JSON: ${file}`);
