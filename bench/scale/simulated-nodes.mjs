// The scale harness's node simulators, in one process of their own (forked by bench/scale.mjs with
// an IPC channel): N simulated node agents (simulated-node.mjs), each on its own loopback port,
// heartbeating to the control planes as node agents do. The harness asks through the channel:
// kill a session's sandbox behind the control plane's back, lose or freeze a node, where sessions are, counts.
// Usage (by the harness): fork('simulated-nodes.mjs', [JSON.stringify({ nodes, controlPlanes, adminKey, heartbeatMs, latencyMs, misbehaving, quietLists, usageSampleMs })])
import { randomBytes } from 'node:crypto';
import { SimulatedNode } from './simulated-node.mjs';

const config = JSON.parse(process.argv[2]);
const objects = new Map();
/** A node API answer's latency: `latencyMs` on average, exponentially spread (as service times are). */
const latencyMs = () => -Math.log(1 - Math.random()) * config.latencyMs;

/** One in `misbehaving` nodes misbehaves, in turn slow, wrong and flaky; the others are good. */
const behaviorOf = (i) =>
  config.misbehaving && i % config.misbehaving === config.misbehaving - 1 ? ['slow', 'wrong', 'flaky'][Math.floor(i / config.misbehaving) % 3] : 'good';

const nodes = [];
for (let i = 0; i < config.nodes; i++) {
  const node = new SimulatedNode({
    id: `sim-${String(i + 1).padStart(4, '0')}`,
    token: randomBytes(24).toString('hex'),
    latencyMs,
    behavior: behaviorOf(i),
    objects,
    quietLists: config.quietLists,
  });
  await node.listen();
  node.startMetering(config.usageSampleMs);
  nodes.push(node);
}
const byId = new Map(nodes.map((n) => [n.id, n]));

/**
 * Heartbeats as a node agent sends them, spread over the interval and over the control planes (one
 * that does not answer: the next, as behind a load balancer). The first one joins, naming the
 * node's sessions, and so does the first after no control plane took one (as `cluster-heartbeat.ts`:
 * one control plane down, the next taking the beat, is no reason to join again).
 */
const joined = new Set();
let stopping = false;
async function beat(node, index) {
  const urls = config.controlPlanes;
  const body = JSON.stringify(node.heartbeat(!joined.has(node.id)));
  for (let tried = 0; tried < urls.length; tried++) {
    if (stopping || node.lost) return;
    try {
      const res = await fetch(`${urls[(index + tried) % urls.length]}/v1/nodes/heartbeat`, {
        method: 'POST',
        headers: { authorization: `Bearer ${config.adminKey}`, 'content-type': 'application/json' },
        body,
      });
      const reply = await res.json();
      if (res.ok) {
        joined.add(node.id);
        for (const sessionId of reply.stop) node.kill(sessionId);
        return;
      }
    } catch {
      // the next control plane
    }
  }
  joined.delete(node.id);
}
const timers = nodes.map((node, i) => {
  const first = setTimeout(
    () => {
      void beat(node, i);
      timers[i] = setInterval(() => void beat(node, i), config.heartbeatMs);
    },
    (i / nodes.length) * config.heartbeatMs,
  );
  return first;
});

const answer = {
  kill: ({ sessionId }) => {
    for (const node of nodes) node.kill(sessionId);
    return true;
  },
  /** Where a session's sandbox runs: its node's API (URL and token) and the sandbox's id, for calls that bypass the control planes. */
  sandboxOf: ({ sessionId }) => {
    for (const node of nodes)
      for (const s of node.sandboxes.values())
        if (s.sessionId === sessionId) return { url: node.url, token: node.token, sandboxId: s.sandboxId, behavior: node.options.behavior };
    return null;
  },
  /** The well-behaved node holding the most sessions' volumes, with those sessions. */
  busiest: () => {
    const node = nodes.filter((n) => !n.lost && n.options.behavior === 'good').reduce((a, b) => (b.volumes.size > a.volumes.size ? b : a));
    return { nodeId: node.id, sessions: [...node.volumes.keys()] };
  },
  /** Requests all nodes served so far, by route name. */
  served: () => {
    const total = {};
    for (const node of nodes) for (const [name, n] of node.served) total[name] = (total[name] ?? 0) + n;
    return total;
  },
  lose: async ({ nodeId }) => {
    await byId.get(nodeId).lose();
    return true;
  },
  freeze: ({ nodeId }) => {
    byId.get(nodeId).freeze();
    return true;
  },
  stop: async () => {
    stopping = true;
    for (const t of timers) clearInterval(t), clearTimeout(t);
    await Promise.all(nodes.filter((n) => !n.lost || n.frozen).map((n) => n.lose()));
    setImmediate(() => process.exit(0));
    return true;
  },
};

process.on('message', async ({ id, op, ...args }) => {
  try {
    process.send({ id, result: await answer[op](args) });
  } catch (err) {
    process.send({ id, error: err.message });
  }
});
// The harness went away (however it stopped): so does every simulated node.
process.on('disconnect', () => process.exit(0));
process.send({ ready: nodes.length });
