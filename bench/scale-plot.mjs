// Draws the scale harness's results (bench/scale.mjs --json) as one SVG of four panels, for
// docs/scale.md: call latency, the maintenance pass and PostgreSQL's statements per second against
// the number of sessions (log scale), each series one JSON file (e.g. before and after a change);
// and exec throughput against the number of control planes.
// Usage: node bench/scale-plot.mjs --out docs/images/scale.svg label=results.json [label=results.json ...]
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { svgDocument } from './svg-panels.mjs';

const { values, positionals } = parseArgs({ options: { out: { type: 'string' } }, allowPositionals: true });
if (!values.out || positionals.length === 0) {
  console.error('usage: node bench/scale-plot.mjs --out file.svg label=results.json [label=results.json ...]');
  process.exit(2);
}
const runs = positionals.map((arg) => {
  const [label, file] = arg.includes('=') ? arg.split('=') : [arg, arg];
  return { label, report: JSON.parse(readFileSync(file, 'utf8')) };
});
const bySessions = (pick) => (run) => run.report.levels.map((l) => [l.sessions, pick(l)]).filter(([, y]) => Number.isFinite(y));
const panels = [
  {
    title: 'exec latency under the mix (ms)',
    xLabel: 'sessions',
    yLabel: 'ms',
    logX: true,
    series: runs.flatMap((run, i) => [
      { run: i, label: `${run.label} p50`, points: bySessions((l) => l.mix.latency.exec?.median)(run) },
      { run: i, label: `${run.label} p99`, points: bySessions((l) => l.mix.latency.exec?.p99)(run), dashed: true },
    ]),
  },
  {
    title: 'maintenance pass, slowest control plane (s)',
    xLabel: 'sessions',
    yLabel: 's',
    logX: true,
    series: runs.map((run, i) => ({ run: i, label: run.label, points: bySessions((l) => Math.max(...l.maintenance.map((m) => m.passSec)))(run) })),
  },
  {
    title: 'PostgreSQL statements per second',
    xLabel: 'sessions',
    yLabel: 'statements/s',
    logX: true,
    series: runs.flatMap((run, i) => [
      { run: i, label: `${run.label} idle`, points: bySessions((l) => l.idle.statementsPerSec)(run) },
      { run: i, label: `${run.label} under the mix`, points: bySessions((l) => l.mix.statementsPerSec)(run), dashed: true },
    ]),
  },
  {
    title: 'exec throughput by control planes (execs/s)',
    xLabel: 'control planes',
    yLabel: 'execs/s',
    logX: false,
    series: runs.flatMap((run, i) =>
      run.report.curve?.length ? [{ run: i, label: run.label, points: run.report.curve.map((p) => [p.controlPlanes, p.execsPerSec]) }] : [],
    ),
  },
];

const svg = svgDocument(
  `SPACE control plane at scale: exec latency, maintenance pass, PostgreSQL statements per second and throughput by control planes (${runs.map((r) => r.label).join(', ')})`,
  panels,
);
writeFileSync(values.out, svg);
console.error(`# ${values.out}: ${runs.map((r) => r.label).join(', ')}`);
