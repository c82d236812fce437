// The CPU an idle sandbox costs with nothing of SPACE in it: N bare runsc containers running
// `sleep` (the host's root, read-only, as their rootfs; no network), the CPU time of all their
// processes (Sentry, gofer, stubs) over a window, for each gVisor platform. The floor of
// bench/density.mjs's "sandboxes" CPU (SPACE's idle sandboxes, each with its agent):
//   ./space script bench/idle-floor.mjs [--sandboxes 20] [--seconds 60] [--platforms ptrace,systrap]
// Prints a table, writes JSON to bench/results.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { numberOption } from './harness.mjs';
import { bareRunsc } from './runsc-floor.mjs';
import { processUse } from './scale/processes.mjs';

const args = process.argv.slice(2);
const sandboxes = numberOption(args, '--sandboxes', 20);
const seconds = numberOption(args, '--seconds', 60);
const platformsAt = args.indexOf('--platforms');
const platforms = platformsAt >= 0 ? args[platformsAt + 1].split(',') : ['ptrace', 'systrap'];
/** CPU seconds the processes `pids` used so far. */
function cpuSecondsOf(pids) {
  let sec = 0;
  for (const pid of pids) {
    try {
      sec += processUse(pid).cpuSec;
    } catch {
      // gone meanwhile
    }
  }
  return sec;
}

const results = [];
for (const platform of platforms) {
  const bare = bareRunsc('/', ['sleep', 'infinity'], { platform });
  try {
    // Ids of one length: runsc finds a container by a prefix of its id (`idle-1` beside `idle-10` is ambiguous).
    for (let i = 0; i < sandboxes; i++) bare.run(`idle-${String(i).padStart(5, '0')}`);
    await sleep(5000); // past their start
    const before = cpuSecondsOf(bare.pids());
    await sleep(seconds * 1000);
    const used = cpuSecondsOf(bare.pids()) - before;
    const msPerSec = (used * 1000) / sandboxes / seconds;
    results.push({ platform, sandboxes, seconds, cpuMsPerSandboxPerSec: msPerSec });
  } finally {
    bare.dispose();
  }
}

// x ms of CPU a second for each of 1,000 sandboxes is x cores.
console.log('| platform | idle sandboxes | CPU per sandbox, ms a second (= cores for 1,000) |\n|---|---|---|');
for (const r of results) console.log(`| ${r.platform} | ${r.sandboxes} | ${r.cpuMsPerSandboxPerSec.toFixed(2)} |`);
const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'results');
mkdirSync(dir, { recursive: true });
const file = path.join(dir, `idle-floor-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, `${JSON.stringify({ date: new Date().toISOString(), results }, null, 2)}\n`);
console.log(`JSON: ${file}`);
