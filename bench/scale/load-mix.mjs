// What the scale harness asks of the control planes: filling the store with sessions (created
// through the API, then most of them paused or stopped), and a realistic mix of calls at a target
// rate for a while, each call timed by operation.
import { eachAtMost } from '../../packages/server-kit/dist/index.js';

/** The sessions the harness made: those with a sandbox (`active`) and those without (`idle`). */
export class SessionPool {
  active = [];
  idle = [];

  /** @param createBody what each session is created with (POST /v1/sessions) */
  constructor(createBody) {
    this.createBody = createBody;
  }

  get size() {
    return this.active.length + this.idle.length;
  }

  static pick(list) {
    return list[Math.floor(Math.random() * list.length)];
  }

  /** Takes one at random out of `list` (swapped with the last: constant time). */
  static take(list) {
    if (list.length === 0) return undefined;
    const i = Math.floor(Math.random() * list.length);
    const picked = list[i];
    list[i] = list[list.length - 1];
    list.pop();
    return picked;
  }
}

/** Creates sessions until the pool holds `target`, `concurrency` at once: each create's latency and the creates per second. */
export async function fill(api, pool, target, concurrency, progress = () => undefined) {
  const samples = [];
  const started = performance.now();
  const missing = Array.from({ length: Math.max(0, target - pool.size) });
  const every = Math.max(1000, Math.round(missing.length / 10));
  await eachAtMost(missing, concurrency, async () => {
    const res = await api.call('create', 'POST', '/v1/sessions', pool.createBody);
    if (!res.ok) return;
    samples.push(res.ms);
    pool.active.push(res.body.id);
    if (samples.length % every === 0) progress(`${pool.size} sessions, ${Math.round(samples.length / ((performance.now() - started) / 1000))} creates/s`);
  });
  const seconds = (performance.now() - started) / 1000;
  return { samples, perSec: samples.length / seconds, seconds };
}

/** Leaves `activeShare` of the sessions with a sandbox: the others paused (half: a full checkpoint) or their sandbox stopped. */
export async function idleOut(api, pool, activeShare, concurrency) {
  const samples = { pause: [], stop: [] };
  const excess = Math.max(0, pool.active.length - Math.round(pool.size * activeShare));
  const chosen = Array.from({ length: excess }, () => SessionPool.take(pool.active));
  await eachAtMost(
    chosen.map((id, i) => [id, i % 2 === 0 ? 'pause' : 'stop']),
    concurrency,
    async ([id, how]) => {
      const res = await api.call(how, 'POST', how === 'pause' ? `/v1/sessions/${id}/pause` : `/v1/sessions/${id}/sandbox/kill`, {});
      if (res.ok) samples[how].push(res.ms);
      (res.ok ? pool.idle : pool.active).push(id);
    },
  );
  return samples;
}

/**
 * The mix, per call: mostly execs on active sessions, file stats, session reads, a sandbox killed
 * behind the control plane's back then called (a resume), an idle session called (a resume; an
 * active one stopped in exchange, so the share holds), and churn (a create and a delete).
 */
const mix = [
  ['exec', 0.7],
  ['stat', 0.1],
  ['get', 0.05],
  ['crash', 0.03],
  ['wake', 0.05],
  ['churn', 0.07],
];

async function runOne(op, api, sim, pool, record) {
  const timed = async (name, method, path, body) => {
    const res = await api.call(name, method, path, body);
    if (res.ok) record(name, res.ms);
    return res;
  };
  switch (op) {
    case 'exec':
      return timed('exec', 'POST', `/v1/sessions/${SessionPool.pick(pool.active)}/exec`, { cmd: 'true' });
    case 'stat':
      return timed('files/stat', 'GET', `/v1/sessions/${SessionPool.pick(pool.active)}/files/stat?path=/home/user/x`);
    case 'get':
      return timed('get session', 'GET', `/v1/sessions/${SessionPool.pick(pool.active)}`);
    case 'crash': {
      const id = SessionPool.pick(pool.active);
      await sim.ask('kill', { sessionId: id });
      return timed('exec after a crash (resume)', 'POST', `/v1/sessions/${id}/exec`, { cmd: 'true' });
    }
    case 'wake': {
      const id = SessionPool.take(pool.idle);
      if (!id) return;
      const res = await timed('exec on an idle session (resume)', 'POST', `/v1/sessions/${id}/exec`, { cmd: 'true' });
      (res.ok ? pool.active : pool.idle).push(id);
      const other = SessionPool.take(pool.active);
      if (other) (await api.call('stop', 'POST', `/v1/sessions/${other}/sandbox/kill`, {})).ok ? pool.idle.push(other) : pool.active.push(other);
      return;
    }
    case 'churn': {
      const created = await timed('create', 'POST', '/v1/sessions', pool.createBody);
      if (created.ok) pool.active.push(created.body.id);
      const gone = SessionPool.take(pool.idle);
      if (gone) await timed('delete', 'DELETE', `/v1/sessions/${gone}`);
    }
  }
}

/**
 * Calls at `rate` per second for `durationSec`, open loop (a call is sent on time whether or not
 * earlier ones answered), at most `maxInFlight` under way (beyond: counted as shed, not sent).
 */
export async function runMix(api, sim, pool, { rate, durationSec, maxInFlight = 2000 }) {
  const latencies = {};
  const record = (name, ms) => (latencies[name] ??= []).push(ms);
  let sent = 0;
  let shed = 0;
  let inFlight = 0;
  const pending = new Set();
  const started = performance.now();
  let upTo = 0;
  const cumulative = mix.map(([op, share]) => [op, (upTo += share)]);
  while (performance.now() - started < durationSec * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    for (; sent < due; sent++) {
      if (inFlight >= maxInFlight) {
        shed++;
        continue;
      }
      const r = Math.random();
      const op = cumulative.find(([, upTo]) => r < upTo)?.[0] ?? 'exec';
      inFlight++;
      const p = runOne(op, api, sim, pool, record).finally(() => {
        inFlight--;
        pending.delete(p);
      });
      pending.add(p);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await Promise.all(pending);
  return { latencies, sent, shed, seconds: (performance.now() - started) / 1000 };
}
