// Draws what issue 36's benches measured as one SVG for docs/benchmarks.md: the cost of a full
// checkpoint, a resume and a fork against the memory a session uses (bench/gigabyte.mjs --json),
// a burst of creates against its size (bench/concurrent-creates.mjs, one JSON per burst size), and
// an active session's exec latency and the host's free memory against the idle sessions beside it
// (bench/density.mjs --json). Floors measured in the same runs are dashed.
// Usage: node bench/cost-plot.mjs --out docs/images/costs.svg --gigabyte g.json --density d.json burst-10.json burst-50.json ...
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { svgDocument } from './svg-panels.mjs';

const { values, positionals } = parseArgs({
  options: { out: { type: 'string' }, gigabyte: { type: 'string' }, density: { type: 'string' } },
  allowPositionals: true,
});
if (!values.out || !values.gigabyte || !values.density || positionals.length === 0) {
  console.error('usage: node bench/cost-plot.mjs --out file.svg --gigabyte gigabyte.json --density density.json burst.json [burst.json ...]');
  process.exit(2);
}
const read = (file) => JSON.parse(readFileSync(file, 'utf8'));

/** [MiB, median] for every size of the gigabyte run that measured `what`. */
const gigabyte = read(values.gigabyte).results;
const bySize = (what) =>
  Object.entries(gigabyte)
    .map(([name, r]) => [/^(\d+) MiB: (.*)$/.exec(name), r])
    .filter(([m]) => m?.[2] === what)
    .map(([m, r]) => [Number(m[1]), r.median]);

const bursts = positionals.map(read).sort((a, b) => a.count - b.count);
/** [burst size, statistic] of the burst named `name` ("first burst", or the repeat) in each run. */
const byBurst = (pick, stat) =>
  bursts.flatMap((b) => {
    const entry = Object.entries(b.results).find(([name]) => pick(name));
    return entry ? [[b.count, entry[1][stat]]] : [];
  });

const density = read(values.density).levels;

const panels = [
  {
    title: 'full checkpoint, resume, fork by memory in use (ms)',
    xLabel: 'MiB in use',
    yLabel: 'ms',
    series: [
      { label: 'sandbox paused', points: bySize('sandbox paused') },
      { label: 'resume after kill, first exec', points: bySize('resume after kill (first exec)') },
      { label: 'bare runsc restore (floor)', points: bySize('bare runsc restore (floor)'), dashed: true },
      { label: 'fork x4, all answering', points: bySize('fork x4, all answering') },
    ],
  },
  {
    title: 'N creates at once, each + first exec (ms)',
    xLabel: 'creates at once',
    yLabel: 'ms',
    logX: true,
    series: [
      { label: 'first burst, median', points: byBurst((n) => n.includes('first burst'), 'median') },
      { label: 'first burst, P90', points: byBurst((n) => n.includes('first burst'), 'p90'), dashed: true },
      { label: 'the burst again, median', points: byBurst((n) => /later: create/.test(n), 'median') },
      { label: 'one alone, booted (floor)', points: byBurst((n) => /alone.*\(floor\)/.test(n) && !n.includes('pooled'), 'median'), dashed: true },
    ],
  },
  {
    title: "an active session's exec beside idle ones (ms)",
    xLabel: 'idle sessions on the node',
    yLabel: 'ms',
    series: [
      { label: 'median', points: density.map((l) => [l.idle, l.exec.median]) },
      { label: 'P99', points: density.map((l) => [l.idle, l.exec.p99]), dashed: true },
    ],
  },
  {
    title: 'host memory available (MB)',
    xLabel: 'idle sessions on the node',
    yLabel: 'MB',
    series: [{ label: 'MemAvailable', points: density.map((l) => [l.idle, l.availableMb]) }],
  },
];

writeFileSync(values.out, svgDocument('SPACE: checkpoints by memory in use, bursts of creates by size, idle sessions on one node', panels));
console.error(`# ${values.out}`);
