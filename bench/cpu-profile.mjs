// Where a process's CPU went: a V8 CPU profile (`node --cpu-prof`, e.g. the control planes of
// `bench/scale.mjs --cpu-prof DIR`) summed by function (self and total time) and by where the code
// lives (a SPACE package's folder, a dependency, Node.js itself, the garbage collector), optionally
// within a window on the monotonic clock (`use.monotonicUs` of a scale phase).
// With `--callers NAME`, also who called the functions whose name holds NAME, by their time on the stack.
// Usage: node bench/cpu-profile.mjs FILE.cpuprofile [--from US] [--to US] [--top 25] [--callers NAME] [--json]
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    from: { type: 'string' },
    to: { type: 'string' },
    top: { type: 'string', default: '25' },
    callers: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
if (positionals.length !== 1) {
  console.error('usage: node bench/cpu-profile.mjs FILE.cpuprofile [--from US] [--to US] [--top 25] [--callers NAME] [--json]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(positionals[0], 'utf8'));
const from = values.from === undefined ? -Infinity : Number(values.from);
const to = values.to === undefined ? Infinity : Number(values.to);
const top = Number(values.top);

/** Where a frame's code lives: the SPACE package and folder, the npm package, Node.js, or V8's own pseudo-frames. */
function placeOf({ url, functionName }) {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node.js';
  const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dependency) return dependency[1];
  const own = /packages\/([^/]+)\/(?:dist|src)\/(?:([^/]+)\/)?/.exec(url);
  if (own) return own[2] && !own[2].endsWith('.js') ? `${own[1]}/${own[2]}` : own[1];
  return url;
}
const frameName = ({ functionName, url, lineNumber }) =>
  `${functionName || '(anonymous)'} ${url ? `${url.replace(/^.*\/(packages|node_modules)\//, '$1/')}:${lineNumber + 1}` : ''}`.trim();

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map();
for (const n of profile.nodes) for (const child of n.children ?? []) parentOf.set(child, n.id);

const self = new Map();
const total = new Map();
const places = new Map();
const callers = new Map();
const add = (map, key, us) => map.set(key, (map.get(key) ?? 0) + us);
let at = profile.startTime;
let windowUs = 0;
// A sample's weight is the time until the next one (V8 records the time since the previous).
for (let i = 0; i < profile.samples.length; i++) {
  at += profile.timeDeltas[i];
  const us = profile.timeDeltas[i + 1] ?? 0;
  if (at < from || at >= to || us <= 0) continue;
  windowUs += us;
  const leaf = byId.get(profile.samples[i]);
  add(self, frameName(leaf.callFrame), us);
  add(places, placeOf(leaf.callFrame), us);
  const seen = new Set();
  const seenCallers = new Set();
  for (let id = leaf.id; id !== undefined; id = parentOf.get(id)) {
    const name = frameName(byId.get(id).callFrame);
    if (!seen.has(name)) add(total, name, us);
    seen.add(name);
    const caller = parentOf.get(id);
    if (values.callers && name.includes(values.callers) && caller !== undefined) {
      const edge = `${frameName(byId.get(caller).callFrame)} -> ${name}`;
      if (!seenCallers.has(edge)) add(callers, edge, us);
      seenCallers.add(edge);
    }
  }
}

const ranked = (map) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, us]) => ({ name, ms: Math.round(us / 1000), share: us / windowUs }));
const busyUs = windowUs - (places.get('(idle)') ?? 0);
const summary = {
  file: positionals[0],
  windowMs: Math.round(windowUs / 1000),
  busyShare: busyUs / windowUs,
  places: ranked(places),
  self: ranked(self),
  total: ranked(total),
  callers: ranked(callers),
};
if (values.json) console.log(JSON.stringify(summary, null, 2));
else {
  const pct = (x) => `${(100 * x).toFixed(1)}%`.padStart(6);
  console.log(`${summary.file}: ${summary.windowMs} ms sampled, busy ${pct(summary.busyShare)}`);
  for (const [title, rows] of [
    ['where (self time)', summary.places],
    ['functions, self time', summary.self],
    ['functions, total time (on the stack)', summary.total],
    ...(values.callers ? [[`callers of ${values.callers}, total time`, summary.callers]] : []),
  ]) {
    console.log(`\n${title}`);
    for (const r of rows) console.log(`${pct(r.share)} ${String(r.ms).padStart(7)} ms  ${r.name}`);
  }
}
