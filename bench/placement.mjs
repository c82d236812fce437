// A placement's CPU: `NodeDirectory.place()` over N registered nodes (the ready one with the fewest
// active sessions for its memory), in process, against its floor in the same run (the least a
// placement over N nodes can do: the smallest of N numbers). The nodes and their counts come from a
// store that answers from memory: what is measured is the control plane's own work per create, which
// every create pays; the store's read is once a second (`placementViewMs`) and not measured here.
// Usage: ./space script bench/placement.mjs [--nodes 1000] [--rounds 40] [--per-round 1000] [--json out.json]
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { NodeDirectory } from '../packages/control-plane/dist/cluster/node-directory.js';
import { SecretCipher } from '../packages/control-plane/dist/store/secret-cipher.js';
import { summarize } from './stats.mjs';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '40' },
    'per-round': { type: 'string', default: '1000' },
    json: { type: 'string' },
  },
});
const nodes = Number(values.nodes);
const rounds = Number(values.rounds);
const perRound = Number(values['per-round']);

const cipher = new SecretCipher(randomBytes(32));
const token = cipher.seal('node-token');
const rows = Array.from({ length: nodes }, (_, i) => ({
  id: `node-${String(i).padStart(4, '0')}`,
  url: `http://127.0.0.1:${20000 + i}`,
  token,
  status: i % 50 === 7 ? 'draining' : 'ready',
  capacity: { memoryMb: [8192, 16384, 32768][i % 3], cpus: 4, diskMb: 100_000 },
  sandboxes: 0,
  registeredAt: new Date().toISOString(),
  lastHeartbeatAt: new Date().toISOString(),
}));
const active = new Map(rows.map((r, i) => [r.id, (i * 7919) % 40]));
const store = {
  // A heartbeat every 2 s: the rows as read are that fresh.
  listNodes: async () => rows.map((r) => ({ ...r, lastHeartbeatAt: new Date().toISOString() })),
  activeByNode: async () => new Map(active),
  recordHeartbeats: async () => undefined,
};
const directory = new NodeDirectory({ store, cipher, lostAfterMs: 10_000, connect: (nodeId) => ({ nodeId, close() {} }) });

/** Microseconds per call of `work` over a round of `perRound` calls. */
async function round(work) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < perRound; i++) await work();
  return Number(process.hrtime.bigint() - started) / 1000 / perRound;
}
const weights = rows.map((r) => ((active.get(r.id) ?? 0) * 1024) / r.capacity.memoryMb);
let sink = 0;
const floor = async () => {
  let best = 0;
  for (let i = 1; i < weights.length; i++) if (weights[i] < weights[best]) best = i;
  sink += best;
};

const samples = { place: [], floor: [] };
// Interleaved, so both see the same machine; the first rounds warm the code up and are dropped.
for (let r = 0; r < rounds + 3; r++) {
  const place = await round(() => directory.place());
  const least = await round(floor);
  if (r >= 3) {
    samples.place.push(place);
    samples.floor.push(least);
  }
}
directory.close();
const report = {
  date: new Date().toISOString(),
  settings: { nodes, rounds, perRound },
  place: summarize(samples.place),
  floor: summarize(samples.floor),
  sink,
};
report.ratio = report.place.median / report.floor.median;
const f = (x) => x.toFixed(2).padStart(8);
console.log(`| µs per placement, ${nodes} nodes | median | P90 |\n|---|---|---|`);
console.log(`| NodeDirectory.place() | ${f(report.place.median)} | ${f(report.place.p90)} |`);
console.log(`| floor: the smallest of ${nodes} numbers | ${f(report.floor.median)} | ${f(report.floor.p90)} |`);
console.log(`ratio (medians): ${report.ratio.toFixed(1)}x`);
if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
