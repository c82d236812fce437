// What a host command (ip, btrfs, runsc…) costs the node agent's event loop: the same commands run
// by a child spawned by this process (Node.js forks the whole process for each) and by the node's
// spawner (packages/node/native/space-spawner), from a process holding as much memory as a busy
// node agent (`--heap-mb`, default 120: ~300 MB resident, as the platform in a burst), one at a time and 8 at once. Measured: each command's
// round trip, the time the event loop was held (the longest delay of a 1 ms timer, and its sum
// beyond 1 ms), and the CPU this process used. The floor: the same timer with no command running.
//   ./space script bench/host-commands.mjs [--commands 200] [--heap-mb 250] [--json FILE]
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { numberOption } from './harness.mjs';
import { printTable, summarize } from './stats.mjs';

const { runCommand } = await import('../packages/node/dist/run-command.js');
const { Spawner } = await import('../packages/node/dist/spawner.js');

const args = process.argv.slice(2);
const commands = numberOption(args, '--commands', 200);
const heapMb = numberOption(args, '--heap-mb', 120);
const jsonAt = args.indexOf('--json');

// Memory like a node agent's: many small objects (page tables to copy at each fork), not one buffer.
const ballast = [];
for (let i = 0; i < heapMb * 8000; i++) ballast.push({ i, name: `object-${i}`, list: [i, i + 1] });

/** Runs `work` while a 1 ms timer measures how long the event loop was held. */
async function held(work) {
  const delays = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    delays.push(now - last - 1);
    last = now;
  }, 1);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const times = await work();
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  clearInterval(timer);
  const positive = delays.map((d) => Math.max(0, d));
  return {
    times,
    wallMs,
    heldMs: positive.reduce((a, b) => a + b, 0),
    longestHoldMs: Math.max(0, ...positive),
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
}

const timed = async (run) => {
  const t = performance.now();
  await run(['true']);
  return performance.now() - t;
};
const oneAtATime = (run) => async () => {
  const times = [];
  for (let i = 0; i < commands; i++) times.push(await timed(run));
  return times;
};
const eightAtOnce = (run) => async () => {
  const times = [];
  let started = 0;
  const worker = async () => {
    while (started++ < commands) times.push(await timed(run));
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return times;
};

const spawner = new Spawner(fileURLToPath(new URL('../packages/node/dist-native/space-spawner', import.meta.url)));
const runners = {
  'spawned by this process': (argv) => runCommand(argv),
  'the spawner': (argv) => spawner.run(argv),
};
const results = [];
try {
  await spawner.run(['true']); // started before it is measured
  for (const [how, shape] of [
    ['one at a time', oneAtATime],
    ['8 at once', eightAtOnce],
  ]) {
    for (const [name, run] of Object.entries(runners)) results.push({ name: `${name}, ${how}`, ...(await held(shape(run))) });
  }
  // Last, once building the ballast is long over (its garbage collection held the loop too).
  results.unshift({ name: 'no command (floor)', ...(await held(() => new Promise((r) => setTimeout(() => r([]), 2000)))) });
} finally {
  await spawner.stop();
}

const rss = Math.round(process.memoryUsage().rss / 2 ** 20);
printTable(results.filter((r) => r.times.length).map((r) => ({ name: `${r.name}: command round trip`, ...summarize(r.times), unit: 'ms' })));
console.log(`\nevent loop held (${commands} commands of \`true\`, this process ${rss} MB resident):`);
for (const r of results) {
  const per = r.times.length ? r.heldMs / r.times.length : 0;
  console.log(
    `  ${r.name.padEnd(40)} held ${r.heldMs.toFixed(0).padStart(6)} ms in ${r.wallMs.toFixed(0).padStart(6)} ms (${((100 * r.heldMs) / r.wallMs).toFixed(0)}%; ${per.toFixed(2)} ms a command), longest ${r.longestHoldMs.toFixed(1)} ms, CPU ${r.cpuMs.toFixed(0)} ms`,
  );
}
const json = { commands, heapMb, rssMb: rss, results: results.map(({ times, ...r }) => ({ ...r, ...(times.length ? summarize(times) : {}) })) };
if (jsonAt >= 0) writeFileSync(args[jsonAt + 1], JSON.stringify(json, null, 1));
console.log(JSON.stringify(json));
