// Many small files, in a sandbox and on the host: bench/small-files.py (100,000 system calls, 50,000
// files of 100 bytes written and removed, the same written in /tmp, a git checkout of a 20,000-file
// tree from loose objects and from a pack, npm ci of express from a warm cache)
// run in a `base` session and on the host in a directory on the node's own btrfs (the disk the
// session's volume is on), one after the other, `--runs` times each. Prints sandbox/host ratios.
// Usage: ./space script bench/small-files.mjs [--runs 3] [--files 50000] [--steps syscalls,files,scratch,git,npm]
//        (settings of the platform it starts from the environment, e.g. SPACE_RUNSC_PLATFORM=systrap)
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { api, benchKey, startPlatform, unattended } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    files: { type: 'string', default: '50000' },
    steps: { type: 'string', default: 'syscalls,files,scratch,git,npm' },
  },
});
const runs = Number(values.runs);
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const program = readFileSync(path.join(root, 'bench/small-files.py'));
const programArgs = ['--files', values.files, '--steps', values.steps];

async function inSandbox(url, sessionId) {
  const put = await fetch(`${url}/v1/sessions/${sessionId}/files?path=/root/small-files.py`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${benchKey}` },
    body: program,
  });
  if (!put.ok) throw new Error(`upload: ${put.status}`);
  const result = await api(url, 'POST', `/v1/sessions/${sessionId}/exec`, {
    // /tmp is a mount of its own in a sandbox (the volume's /tmp bound there).
    cmd: ['python3', '/root/small-files.py', '/root/small-files-work', '--scratch', '/tmp', ...programArgs],
    timeoutMs: 600_000,
  });
  if (result.exitCode !== 0) throw new Error(`in the sandbox: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

function onHost() {
  // The node's btrfs, where session volumes live: the same disk and mount options as the sandbox's files.
  const work = path.join(dataDir, 'btrfs', 'small-files-bench');
  try {
    const scratch = `${work}-scratch`;
    mkdirSync(scratch, { recursive: true });
    return JSON.parse(execFileSync('python3', [path.join(root, 'bench/small-files.py'), work, '--scratch', scratch, ...programArgs], { encoding: 'utf8' }));
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(`${work}-scratch`, { recursive: true, force: true });
  }
}

const { results, rows, record } = recorder();
const sandbox = [];
const host = [];
const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0' });
try {
  const session = await api(platform.url, 'POST', '/v1/sessions', {
    template: 'base',
    ...unattended,
  });
  try {
    for (let i = 0; i < runs; i++) {
      sandbox.push(await inSandbox(platform.url, session.id));
      host.push(onHost());
    }
  } finally {
    await api(platform.url, 'DELETE', `/v1/sessions/${session.id}`);
  }
} finally {
  await platform.stop();
}

const ratios = {};
for (const step of Object.keys(sandbox[0]).filter((s) => s !== 'npm files')) {
  record(
    `${step}: sandbox`,
    sandbox.map((r) => r[step]),
  );
  record(
    `${step}: host (floor)`,
    host.map((r) => r[step]),
  );
  ratios[step] = results[`${step}: sandbox`].median / results[`${step}: host (floor)`].median;
}
printTable(rows);
console.log('');
for (const [step, ratio] of Object.entries(ratios)) console.log(`${step}: sandbox / host ${ratio.toFixed(2)}x (medians)`);
if (sandbox[0]['npm files']) console.log(`(npm ci wrote ${sandbox[0]['npm files']} files)`);
const outDir = path.join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const file = path.join(outDir, `small-files-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
const settings = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('SPACE_')));
writeFileSync(file, JSON.stringify({ runs, files: Number(values.files), steps: values.steps, settings, results, ratios }, null, 2));
console.log(`JSON: ${file}`);
