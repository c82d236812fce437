// The control plane at scale, measured by simulation: real control planes (`space control-plane`
// processes) on a real PostgreSQL, and simulated nodes (bench/scale/simulated-nodes.mjs: one
// process hosting up to a thousand node agents that register, heartbeat and answer the real node
// API with no sandbox behind them), so what is measured is the control plane's own cost.
//
// Per level of sessions (created through the API; then all but `--active` of them paused or
// stopped): creates per second, call latency under a mix at `--rate` (execs, file stats, session
// reads, crashes and resumes, idle sessions woken, creates and deletes), the control plane's added
// latency per exec against the same exec sent to the node directly (the floor, in the same run),
// PostgreSQL statements per call and per second (pg_stat_statements), each control plane's CPU and
// memory, idle and under load, the maintenance pass (its /metrics) and the sessions whose
// maintenance is overdue by more than a tick (read in PostgreSQL every second, once the backlog of
// the level's first automatic checkpoints is worked off), and a node lost:
// detection and every one of its sessions answering from another node; then a node frozen with a
// call of each of its sessions waiting on it: until those calls end, and the sessions answer again. Then, with `--curve`, exec
// throughput against 1..M control planes; last, one control plane killed: the overdue sessions and
// the survivors' passes.
//
// It starts everything it measures (PostgreSQL on loopback, the control planes, the simulated nodes)
// and stops it at the end: it creates and deletes sessions by the hundred thousand, so it refuses a
// database that is not on loopback and a cluster with any node that is not one of its simulators.
//
// Usage: ./space script bench/scale.mjs [--levels 1000,10000,100000] [--nodes 1000] [--control-planes 2]
//   [--active 0.2] [--rate 300] [--duration 30] [--curve] [--json out.json] [--smoke]
//   [--idle-sec 10] (how long each level is measured idle, minute by minute)
//   [--idle-timeout-sec 3600] (the sessions' idle timeout: longer than a level's run, so the sessions
//   the mix calls active still run when it calls them; 900, the default's, stopped most of them in a
//   100k run with 240 s idle)
//   [--no-quiet-lists] (nodes do not say which sandboxes are quiet, as before 2026-12-06: every
//   look at a running session asks its node whether the volume changed)
//   [--database-socket] (the control planes reach PostgreSQL through its Unix socket, not TCP on
//   loopback: what sending statements costs the control planes' cores)
//   [--logs DIR] (each control plane's output in DIR/control-plane-N.log: warnings and errors, as
//   SPACE_QUIET leaves them)
//   [--cpu-prof DIR] (each control plane writes a V8 CPU profile to DIR when it stops; each phase's
//   `use.monotonicUs` in the JSON is its window there: `bench/cpu-profile.mjs FILE --from A --to B`.
//   A control plane killed writes none)
import { fork } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startLocalPostgres } from '../packages/control-plane/dist/store/local-postgres.js';
import { parseMetricsText } from '../packages/control-plane/dist/api/metrics-report.js';
import { eachAtMost, signalAndWait } from '../packages/server-kit/dist/index.js';
import { ScaleApi } from './scale/api.mjs';
import { SessionPool, fill, idleOut, runMix } from './scale/load-mix.mjs';
import { cpuShare, parentPid, processUse, startControlPlane, treeUse } from './scale/processes.mjs';
import { summarize } from './stats.mjs';

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '1000,10000,100000' },
    nodes: { type: 'string', default: '1000' },
    'control-planes': { type: 'string', default: '2' },
    active: { type: 'string', default: '0.2' },
    rate: { type: 'string', default: '300' },
    duration: { type: 'string', default: '30' },
    concurrency: { type: 'string', default: '48' },
    'node-latency-ms': { type: 'string', default: '2' },
    'idle-sec': { type: 'string', default: '10' },
    'idle-timeout-sec': { type: 'string', default: '3600' },
    misbehaving: { type: 'string', default: '50' },
    'database-url': { type: 'string' },
    curve: { type: 'boolean', default: false },
    json: { type: 'string' },
    smoke: { type: 'boolean', default: false },
    'quiet-lists': { type: 'boolean', default: true },
    'database-socket': { type: 'boolean', default: false },
    logs: { type: 'string' },
    'cpu-prof': { type: 'string' },
  },
  allowNegative: true,
});
const smoke = values.smoke;
const settings = {
  levels: (smoke ? '200' : values.levels).split(',').map(Number),
  nodes: smoke ? 12 : Number(values.nodes),
  controlPlanes: Number(values['control-planes']),
  active: Number(values.active),
  rate: smoke ? 60 : Number(values.rate),
  durationSec: smoke ? 5 : Number(values.duration),
  concurrency: Number(values.concurrency),
  latencyMs: Number(values['node-latency-ms']),
  idleSec: Number(values['idle-sec']),
  idleTimeoutSec: Number(values['idle-timeout-sec']),
  misbehaving: smoke ? 4 : Number(values.misbehaving),
  quietLists: values['quiet-lists'],
  databaseSocket: values['database-socket'],
};

/** The maintenance tick of the control planes (SPACE_MAINTENANCE_TICK_MS, its default). */
const tickMs = 5000;

/** Only a database on this machine: the harness fills it with sessions and deletes them. */
function refuseRemoteDatabase(url) {
  const host = new URL(url).hostname;
  if (!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(host)) {
    console.error(`bench/scale.mjs refuses ${host}: it creates and deletes sessions by the hundred thousand, so only a database on loopback`);
    process.exit(2);
  }
}
if (values['database-url']) refuseRemoteDatabase(values['database-url']);

const adminKey = `sk_scale_${randomBytes(16).toString('hex')}`;
const work = mkdtempSync(path.join(tmpdir(), 'space-scale-'));
const postgres = values['database-url']
  ? null
  : await startLocalPostgres({ settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' } });
const databaseUrl = values['database-url'] ?? (await postgres.url('space_scale'));
const databaseName = new URL(databaseUrl).pathname.slice(1);
const monitor = new pg.Client({ connectionString: new URL('/postgres', databaseUrl).href });
await monitor.connect();
await monitor.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
/** Statements PostgreSQL ran on the harness's database so far. */
const statements = async () =>
  Number(
    (
      await monitor.query('SELECT coalesce(sum(calls), 0) AS n FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1', [
        databaseName,
      ])
    ).rows[0].n,
  );
const postgresPid = Number((await monitor.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
/** The URL the control planes connect with: through PostgreSQL's Unix socket with `--database-socket`. */
async function controlPlaneDatabaseUrl() {
  if (!values['database-socket']) return databaseUrl;
  const dirs = (await monitor.query('SHOW unix_socket_directories')).rows[0].unix_socket_directories;
  const url = new URL(databaseUrl);
  url.searchParams.set('host', dirs.split(',')[0].trim());
  return url.href;
}
const controlPlaneUrl = await controlPlaneDatabaseUrl();
/** The harness's own database, for what it reads there (sessions whose maintenance is overdue). */
const reader = new pg.Client({ connectionString: databaseUrl });
/** PostgreSQL's server: the postmaster (parent of this connection's backend) and all its processes. */
const postmasterPid = parentPid(postgresPid);

const controlPlanes = [];
// Stopped however the harness stops (the simulated nodes leave with its IPC channel, PostgreSQL with
// its exit), its working directory removed here, not in the `finally` a signal or an uncaught error skips.
process.once('exit', () => {
  for (const { child } of controlPlanes) child.kill('SIGTERM');
  rmSync(work, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => process.exit(130));
let sim = null;
const api = new ScaleApi([], adminKey);
const report = { date: new Date().toISOString(), settings, levels: [], curve: [] };
try {
  if (values.logs) mkdirSync(values.logs, { recursive: true });
  for (let i = 0; i < settings.controlPlanes; i++) {
    controlPlanes.push(
      await startControlPlane(
        `control-plane-${i + 1}`,
        {
          SPACE_DATA_DIR: path.join(work, `cp-${i + 1}`),
          SPACE_HOST: '127.0.0.1',
          SPACE_PORT: '0',
          SPACE_DATABASE_URL: controlPlaneUrl,
          SPACE_API_KEY: adminKey,
          SPACE_SECRETS_KEY_FILE: path.join(work, 'secrets.key'),
          // The simulated nodes keep "objects" in memory; the control planes ship and move as with a real store.
          SPACE_OBJECT_STORE: 's3://simulated',
          SPACE_QUIET: '1',
          SPACE_TENANT_MAX_SESSIONS: '1000000',
          SPACE_TENANT_MAX_CONCURRENT_CREATES: '512',
          SPACE_TENANT_REQUESTS_PER_SEC: '1000000',
          SPACE_TENANT_MAX_REQUESTS: '100000',
          SPACE_TENANT_MAX_STREAMS: '100000',
          ...(values['cpu-prof'] ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${path.resolve(values['cpu-prof'])}` } : {}),
        },
        (name, line) => {
          if (/maintenance pass (took|still running)/.test(line)) progress(`${name}: ${line}`);
          if (values.logs) appendFileSync(path.join(values.logs, `${name}.log`), `${new Date().toISOString()} ${line}\n`);
        },
      ),
    );
  }
  api.urls = controlPlanes.map((c) => c.url);
  await reader.connect();
  const strangers = (await api.call('nodes', 'GET', '/v1/nodes')).body.nodes.filter((n) => !n.id.startsWith('sim-'));
  if (strangers.length)
    throw new Error(`refused: nodes that are not simulators are registered (${strangers.map((n) => n.id).join(', ')}); the harness needs a cluster of its own`);
  sim = await startSimulator();
  await waitFor(async () => (await nodesByStatus()).ready === settings.nodes, 120_000, `${settings.nodes} simulated nodes registered`);
  progress(`${controlPlanes.length} control planes, ${settings.nodes} simulated nodes, PostgreSQL at ${databaseUrl}`);

  const pool = new SessionPool({ template: 'tiny', idleTimeoutSec: settings.idleTimeoutSec });
  for (const level of settings.levels) report.levels.push(await measureLevel(level, pool));
  if (values.curve) report.curve = await throughputCurve(pool);
  if (controlPlanes.length > 1) {
    // Measured from a steady state: what the mix and the node loss left overdue is theirs, not the kill's.
    const settled = await drainBacklog(pool.active.length, 1 / 1000);
    report.controlPlaneKilled = { settled, ...(await killControlPlane()) };
  }
} finally {
  api.close();
  await reader.end().catch(() => undefined);
  if (sim) await sim.ask('stop').catch(() => undefined);
  await Promise.all(controlPlanes.map((c) => signalAndWait(c.child, 'SIGTERM')));
  await monitor.end().catch(() => undefined);
  await postgres?.stop();
}

printReport(report);
const out = values.json ?? path.join(path.dirname(fileURLToPath(import.meta.url)), 'results', `scale-${report.date.slice(0, 10)}${smoke ? '-smoke' : ''}.json`);
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.error(`# JSON in ${out}`);

/** One level: the store filled to `level` sessions, then measured idle, under the mix, and through a node's loss. */
async function measureLevel(level, pool) {
  const beforeFill = await statementTotals();
  const filling = await measured(() => fill(api, pool, level, settings.concurrency, progress));
  const filled = filling.result;
  const fillTop = { byTime: await topStatements(beforeFill, ' fill'), byCalls: await topStatements(beforeFill, ' fill', 'calls') };
  const idled = await idleOut(api, pool, settings.active, settings.concurrency);
  progress(`${level} sessions: ${Math.round(filled.perSec)} creates/s; ${pool.active.length} active, ${pool.idle.length} paused or stopped`);
  // Idle: only heartbeats and maintenance (one tick of each control plane at least).
  const backlog = await drainBacklog(pool.active.length);
  const watch = watchOverdue('idle');
  const beforeIdle = await statementTotals();
  const idle = await measured(() => idleWindows(settings.idleSec));
  const idleTop = await topStatements(beforeIdle, ' idle');
  const overhead = await execOverhead(pool);
  watch.phase('mix');
  const mix = await measured(() => runMix(api, sim, pool, { rate: settings.rate, durationSec: settings.durationSec }));
  const overdue = await watch.end();
  const calls = Object.values(mix.result.latencies).reduce((n, s) => n + s.length, 0);
  const maintenance = await scrapeMaintenance();
  const statementsTop = await topStatements();
  const loss = await loseNode('closed');
  const frozen = await loseNode('frozen');
  const latency = Object.fromEntries(Object.entries(mix.result.latencies).map(([op, samples]) => [op, summarize(samples)]));
  const row = {
    sessions: pool.size,
    active: pool.active.length,
    nodes: settings.nodes,
    creates: {
      perSec: filled.perSec,
      ...summarize(filled.samples),
      use: filling.use,
      statementsPerCreate: filling.use.statements / filled.samples.length,
      statementsTop: fillTop,
    },
    pause: summarize(idled.pause),
    stop: summarize(idled.stop),
    overheadMs: overhead,
    idle: { ...idle.use, windows: idle.result, statementsTop: idleTop },
    mix: {
      ...mix.use,
      callsPerSec: calls / mix.result.seconds,
      sent: mix.result.sent,
      shed: mix.result.shed,
      statementsPerCall: (mix.use.statements - idle.use.statementsPerSec * mix.result.seconds) / calls,
      latency,
    },
    errors: api.takeErrors(),
    maintenance,
    backlog,
    overdue,
    statementsTop,
    loss,
    frozen,
  };
  progress(
    `${level}: exec p50 ${latency.exec?.median.toFixed(1)} ms, overhead ${overhead.median.toFixed(2)} ms, ${row.mix.statementsPerCall.toFixed(1)} statements/call, pass ${maintenance.map((m) => m.passSec.toFixed(2)).join('/')} s, overdue at most ${overdue.sessions} (${overdue.lateSec.toFixed(1)} s; idle ${overdue.byPhase.idle?.sessions ?? 0}, mix ${overdue.byPhase.mix?.sessions ?? 0}), node loss: ${loss.moved} of ${loss.sessions} sessions answering ${(loss.movedMs / 1000).toFixed(1)} s after detection (${loss.unmovable} never checkpointed); node frozen: ${frozen.moved} of ${frozen.sessions} answering ${(frozen.movedMs / 1000).toFixed(1)} s after detection, the calls waiting on it ended ${(frozen.cutFirstMs / 1000).toFixed(1)}–${(frozen.cutMs / 1000).toFixed(1)} s after it (${frozen.unmovable} never checkpointed, ${frozen.failed} failed)`,
  );
  return row;
}

/**
 * Idle for `seconds`, with the statements, checkpoints and node questions a second in each minute:
 * the first automatic checkpoints come a minute after their sessions' creation, then the steady
 * state, which is what the looks put off change.
 */
async function idleWindows(seconds, windowSec = 60) {
  const windows = [];
  for (let at = 0; at < seconds; at += windowSec) {
    const length = Math.min(windowSec, seconds - at);
    const stmtBefore = await statements();
    const servedBefore = await sim.ask('served');
    await sleep(length * 1000);
    const served = await sim.ask('served');
    const perSec = (name) => ((served[name] ?? 0) - (servedBefore[name] ?? 0)) / length;
    windows.push({
      fromSec: at,
      statementsPerSec: ((await statements()) - stmtBefore) / length,
      checkpointsPerSec: perSec('checkpoint'),
      questionsPerSec: perSec('volumeChanged') + perSec('sandbox GET /processes'),
    });
  }
  progress(`idle, each minute: ${windows.map((w) => `${w.statementsPerSec.toFixed(0)} stmts/s, ${w.checkpointsPerSec.toFixed(1)} checkpoints/s`).join('; ')}`);
  return windows;
}

/** What `work` returned, with its time and what the control planes and PostgreSQL used meanwhile. */
async function measured(work) {
  const before = controlPlanes.map((c) => processUse(c.child.pid));
  const pgBefore = treeUse(postmasterPid);
  const simBefore = processUse(sim.pid);
  const selfBefore = processUse(process.pid);
  const stmtBefore = await statements();
  const servedBefore = await sim.ask('served');
  const started = performance.now();
  const startedUs = process.hrtime.bigint() / 1000n;
  const result = await work();
  const seconds = (performance.now() - started) / 1000;
  // On the monotonic clock of V8's CPU profiles (`--cpu-prof`): bench/cpu-profile.mjs --from/--to.
  const monotonicUs = [Number(startedUs), Number(process.hrtime.bigint() / 1000n)];
  const stmts = (await statements()) - stmtBefore;
  const served = await sim.ask('served');
  const after = controlPlanes.map((c) => processUse(c.child.pid));
  return {
    result,
    use: {
      seconds,
      monotonicUs,
      statements: stmts,
      statementsPerSec: stmts / seconds,
      controlPlaneCpu: after.map((a, i) => cpuShare(before[i], a, seconds)),
      controlPlaneRssMb: after.map((a) => a.rss / 1e6),
      postgresCpu: cpuShare(pgBefore, treeUse(postmasterPid), seconds),
      // The load's own side: one process hosts every simulated node, another sends the calls. Near a
      // whole core, either makes every call slow whatever the control planes do.
      simulatorCpu: cpuShare(simBefore, processUse(sim.pid), seconds),
      harnessCpu: cpuShare(selfBefore, processUse(process.pid), seconds),
      // What the control planes asked of the nodes, per second (the looks' `volumeChanged` and `processes` among them).
      nodeCallsPerSec: Object.fromEntries(Object.entries(served).map(([name, n]) => [name, (n - (servedBefore[name] ?? 0)) / seconds])),
    },
  };
}

/** The control plane's added latency per exec: the same exec on a well-behaved node through a control plane and sent to the node directly, one at a time, interleaved. */
async function execOverhead(pool) {
  let target = null;
  for (let i = 0; i < 50 && !target; i++) {
    const id = SessionPool.pick(pool.active);
    let where = await sim.ask('sandboxOf', { sessionId: id });
    // Stopped at its idle timeout (`--idle-timeout-sec`, which a long fill and idle may outlast): a call resumes it.
    if (!where) {
      await api.call('exec (sequential)', 'POST', `/v1/sessions/${id}/exec`, { cmd: 'true' });
      where = await sim.ask('sandboxOf', { sessionId: id });
    }
    if (where?.behavior === 'good') target = { id, ...where };
  }
  if (!target) throw new Error('no active session with a sandbox on a well-behaved node in 50 tries: the per-exec overhead cannot be measured');
  const direct = new ScaleApi([target.url], target.token);
  const through = [];
  const straight = [];
  for (let i = 0; i < (smoke ? 50 : 300); i++) {
    const a = await api.call('exec (sequential)', 'POST', `/v1/sessions/${target.id}/exec`, { cmd: 'true' });
    const b = await direct.call('exec on the node', 'POST', `/node/v1/sandboxes/${target.sandboxId}/exec`, { cmd: 'true' });
    if (a.ok) through.push(a.ms);
    if (b.ok) straight.push(b.ms);
  }
  direct.close();
  const t = summarize(through);
  const s = summarize(straight);
  return { median: t.median - s.median, p90: t.p90 - s.p90, throughControlPlane: t, direct: s };
}

/**
 * The statements waiting for a lock on the harness's database right now, by their start (what waits
 * for another transaction's rows: a counter, a session's usage hour), and those they wait behind.
 */
async function lockWaits() {
  const { rows } = await monitor.query(
    `SELECT left(regexp_replace(w.query, '\\s+', ' ', 'g'), 100) AS waiting,
            left(regexp_replace(b.query, '\\s+', ' ', 'g'), 100) AS behind, count(*) AS n
       FROM pg_stat_activity w
       CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocker(pid)
       JOIN pg_stat_activity b ON b.pid = blocker.pid
      WHERE w.datname = $1 AND w.wait_event_type = 'Lock'
      GROUP BY 1, 2 ORDER BY n DESC LIMIT 5`,
    [databaseName],
  );
  return rows.map((r) => ({ waiting: r.waiting, behind: r.behind, n: Number(r.n) }));
}

/** Each statement PostgreSQL ran on the harness's database so far: its calls and time, by its id. */
async function statementTotals() {
  const { rows } = await monitor.query(
    `SELECT queryid, left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS query, calls, total_exec_time AS ms
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`,
    [databaseName],
  );
  return new Map(rows.map((r) => [r.queryid, { query: r.query, calls: Number(r.calls), ms: Number(r.ms) }]));
}

/**
 * Where PostgreSQL's time went on the harness's database: the 8 statements that took the most (or,
 * `by` 'calls', that ran most often), with their calls; so far, or since `since` (a
 * `statementTotals()`), with `label` in the progress lines.
 */
async function topStatements(since = new Map(), label = '', by = 'totalMs') {
  const spent = [...(await statementTotals())].map(([id, now]) => {
    const before = since.get(id) ?? { calls: 0, ms: 0 };
    return { query: now.query, calls: now.calls - before.calls, totalMs: now.ms - before.ms };
  });
  const top = spent
    .filter((s) => s.calls > 0)
    .sort((a, b) => b[by] - a[by])
    .slice(0, 8)
    .map((s) => ({ query: s.query, calls: s.calls, totalMs: Math.round(s.totalMs), meanMs: Math.round((s.totalMs / s.calls) * 1000) / 1000 }));
  for (const r of top) progress(`  PostgreSQL${label}: ${r.totalMs} ms in ${r.calls} calls (${r.meanMs} ms each): ${r.query}`);
  return top;
}

/** Each control plane's last maintenance pass and how long its /metrics took. */
async function scrapeMaintenance() {
  return Promise.all(
    controlPlanes.map(async ({ url }) => {
      const res = await api.call('metrics', 'GET', '/metrics', undefined, url);
      const values = parseMetricsText(String(res.body));
      const byStatus = Object.fromEntries(
        Object.entries(values).flatMap(([series, n]) => {
          const status = /^space_sessions\{status="(\w+)"\}$/.exec(series)?.[1];
          return status ? [[status, n]] : [];
        }),
      );
      return {
        passSec: values.space_maintenance_last_pass_seconds ?? Number.NaN,
        passSessions: values.space_maintenance_last_pass_sessions ?? Number.NaN,
        passes: values.space_maintenance_passes_total ?? Number.NaN,
        visits: values.space_maintenance_visits_total ?? Number.NaN,
        // Its connections to PostgreSQL in use, and the statements waiting for one: the calls' pool
        // (SPACE_DATABASE_CONNECTIONS) and maintenance's (SPACE_DATABASE_BACKGROUND_CONNECTIONS).
        connectionsBusy: values['space_store_connections{pool="calls",state="busy"}'] ?? Number.NaN,
        statementsWaiting: values['space_store_statements_waiting{pool="calls"}'] ?? Number.NaN,
        backgroundBusy: values['space_store_connections{pool="background",state="busy"}'] ?? Number.NaN,
        backgroundWaiting: values['space_store_statements_waiting{pool="background"}'] ?? Number.NaN,
        metricsMs: res.ms,
        byStatus,
      };
    }),
  );
}

/** Sessions with a sandbox on a live node whose next maintenance was due more than a tick ago, and the earliest such due time. */
async function overdueNow() {
  const now = Date.now();
  const { rows } = await reader.query(
    `SELECT count(*) AS n, min(s.maintain_after) AS oldest FROM sessions s JOIN nodes n ON n.id = s.node_id
      WHERE s.sandbox_id IS NOT NULL AND s.maintain_after < $1 AND n.last_heartbeat_at > $2`,
    [now - tickMs, new Date(now - 5000).toISOString()],
  );
  return { sessions: Number(rows[0].n), lateSec: rows[0].oldest === null ? 0 : (now - Number(rows[0].oldest)) / 1000 };
}

/**
 * Creating a level's sessions in a burst makes all their first automatic checkpoints due within the
 * same minute or so: waited out (until fewer than `share` of the active sessions, 1% unless given, or
 * 10 are overdue, at most 10 min), so that what follows measures the steady state. Also before a
 * control plane is killed, for what the mix left. Returns how long it took and how many were left.
 */
async function drainBacklog(active, share = 1 / 100) {
  const started = performance.now();
  let overdue = await overdueNow();
  const limit = Math.max(10, active * share);
  while (overdue.sessions > limit && performance.now() - started < 600_000) {
    await sleep(2000);
    overdue = await overdueNow();
  }
  const sec = (performance.now() - started) / 1000;
  progress(`the backlog: ${sec.toFixed(0)} s until ${overdue.sessions} sessions were overdue by more than a tick`);
  return { sec, overdue: overdue.sessions };
}

/**
 * Samples, every second until `end()`, the sessions with a sandbox on a live node whose next
 * maintenance was due more than a tick ago (not visited within one tick): the most at once, and the
 * most overdue one's lateness beyond its due time, overall and in each phase named with
 * `phase(name)`; and every 10 s the control planes' last passes and connections to PostgreSQL, and
 * the statements waiting for a lock (`lockWaits`).
 * `timeline` keeps each sample, so a run shows when sessions fell behind and what the passes were
 * doing then.
 */
function watchOverdue(firstPhase = 'all') {
  const worst = { sessions: 0, lateSec: 0, samples: 0, byPhase: {}, timeline: [] };
  const started = performance.now();
  let phase = firstPhase;
  let running = true;
  let failed = null;
  let lastPassesAt = -Infinity;
  const sampling = (async () => {
    while (running) {
      const now = await overdueNow();
      const atSec = Math.round((performance.now() - started) / 100) / 10;
      const sample = { atSec, phase, ...now };
      if (performance.now() - lastPassesAt >= 10_000) {
        lastPassesAt = performance.now();
        // The passes and connections: not the counts by status, the visits or how long /metrics took.
        sample.passes = (await scrapeMaintenance()).map(({ visits, metricsMs, byStatus, ...pass }) => pass);
        sample.lockWaits = await lockWaits();
      }
      worst.timeline.push(sample);
      worst.samples++;
      worst.sessions = Math.max(worst.sessions, now.sessions);
      worst.lateSec = Math.max(worst.lateSec, now.lateSec);
      const ofPhase = (worst.byPhase[phase] ??= { sessions: 0, lateSec: 0 });
      ofPhase.sessions = Math.max(ofPhase.sessions, now.sessions);
      ofPhase.lateSec = Math.max(ofPhase.lateSec, now.lateSec);
      await sleep(1000);
    }
  })().catch((err) => {
    // Told by end(); when the level failed before it, its own error is the one to see, not this
    // one (the database connection closed under the watch as the harness stopped).
    failed = err;
  });
  return {
    phase: (name) => {
      phase = name;
    },
    end: async () => {
      running = false;
      await sampling;
      if (failed) throw failed;
      return worst;
    },
  };
}

/**
 * The last control plane is killed (SIGKILL): the others take its nodes (the roster, within ~4 s),
 * and each maintenance pass of theirs must still cover every due session within a tick. Measured
 * from the kill: sessions overdue during the handover (the first 10 s) and after it (20 s; smoke:
 * 5 s), and the survivors' passes.
 */
async function killControlPlane() {
  const victim = controlPlanes.pop();
  victim.child.kill('SIGKILL');
  api.urls = controlPlanes.map((c) => c.url);
  const killedAt = performance.now();
  const passes = [];
  const watchFor = async (ms) => {
    const watch = watchOverdue();
    const until = performance.now() + ms;
    while (performance.now() < until) {
      passes.push(...(await scrapeMaintenance()).map((m, i) => ({ controlPlane: i + 1, atSec: (performance.now() - killedAt) / 1000, ...m })));
      await sleep(2000);
    }
    return watch.end();
  };
  const handover = await watchFor(10_000);
  const after = await watchFor(smoke ? 5_000 : 20_000);
  const longest = Math.max(...passes.map((p) => p.passSec));
  const most = Math.max(...passes.map((p) => p.passSessions));
  progress(
    `a control plane killed: overdue at most ${handover.sessions} sessions during the handover (${handover.lateSec.toFixed(1)} s late), ${after.sessions} after it; the survivors' passes up to ${longest.toFixed(2)} s, ${most} sessions`,
  );
  return { handover, after, longestPassSec: longest, mostPassSessions: most, passes };
}

/**
 * The busiest well-behaved node is lost: how long until it is seen lost, and until every one of its
 * sessions answers (from another node). `closed`: its port closes (a dead process), and its
 * sessions are called once it is seen lost. `frozen`: it takes connections and answers nothing (a
 * stopped process, a network dropping its answers), and each of its sessions is called at once,
 * so the calls wait on it until a control plane finds it lost and ends them (`cutMs`: the last
 * ended, from detection); each session is then called again.
 */
async function loseNode(how) {
  const { nodeId, sessions } = await sim.ask('busiest');
  const lostAt = performance.now();
  await sim.ask(how === 'frozen' ? 'freeze' : 'lose', { nodeId });
  // Its own connections: the calls waiting on a frozen node hold every one of the mix's.
  const watcher = new ScaleApi(api.urls, adminKey);
  const detection = waitFor(
    async () => (await watcher.call('nodes', 'GET', '/v1/nodes')).body.nodes.find((n) => n.id === nodeId)?.status === 'lost',
    60_000,
    `${nodeId} seen lost`,
  )
    .then(() => performance.now() - lostAt)
    .finally(() => watcher.close());
  // Awaited below, after the calls: a timeout meanwhile is not an unhandled rejection.
  detection.catch(() => undefined);
  if (how === 'closed') await detection;
  const answered = [];
  const firstEnds = [];
  let unmovable = 0;
  let failed = 0;
  // Frozen: every call at once, since each waits until the node is found lost.
  await eachAtMost(sessions, how === 'frozen' ? sessions.length : settings.concurrency, async (id) => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const res = await api.call(`exec after node ${how}`, 'POST', `/v1/sessions/${id}/exec`, { cmd: 'true' });
      if (attempt === 0) firstEnds.push(performance.now() - lostAt);
      if (res.ok) return answered.push(res.ms);
      // Nothing of it reached the object store (no automatic checkpoint was due yet): refused clearly, by design.
      if (/none of its checkpoints reached the object store/.test(res.body?.error?.message ?? '')) return unmovable++;
    }
    failed++;
  });
  const detectedMs = await detection;
  return {
    nodeId,
    how,
    sessions: sessions.length,
    moved: answered.length,
    unmovable,
    failed,
    detectedMs,
    // From detection: the first of the waiting calls ended (the cut), and the last (those that moved in that call had moved).
    ...(how === 'frozen' ? { cutFirstMs: Math.min(...firstEnds) - detectedMs, cutMs: Math.max(...firstEnds) - detectedMs } : {}),
    movedMs: performance.now() - lostAt - detectedMs,
    exec: summarize(answered),
  };
}

/** Exec throughput, closed loop, against the first k control planes for k = 1..M: where adding one stops helping. */
async function throughputCurve(pool) {
  const points = [];
  for (let k = 1; k <= controlPlanes.length; k++) {
    const subset = new ScaleApi(api.urls.slice(0, k), adminKey);
    let done = 0;
    const until = performance.now() + 15_000;
    const m = await measured(() =>
      Promise.all(
        Array.from({ length: 64 }, async () => {
          while (performance.now() < until)
            if ((await subset.call('exec (curve)', 'POST', `/v1/sessions/${SessionPool.pick(pool.active)}/exec`, { cmd: 'true' })).ok) done++;
        }),
      ),
    );
    subset.close();
    points.push({ controlPlanes: k, execsPerSec: done / m.use.seconds, ...m.use });
    progress(`${k} control plane(s): ${Math.round(done / m.use.seconds)} execs/s, PostgreSQL ${Math.round(m.use.postgresCpu * 100)}% of a core`);
  }
  return points;
}

async function startSimulator() {
  const child = fork(path.join(path.dirname(fileURLToPath(import.meta.url)), 'scale', 'simulated-nodes.mjs'), [
    JSON.stringify({
      nodes: settings.nodes,
      controlPlanes: api.urls,
      adminKey,
      heartbeatMs: 2000,
      // As node agents by default (SPACE_USAGE_SAMPLE_SEC): a usage batch of each running sandbox every 15 s.
      usageSampleMs: 15_000,
      latencyMs: settings.latencyMs,
      misbehaving: settings.misbehaving,
      quietLists: settings.quietLists,
    }),
  ]);
  const waiting = new Map();
  let next = 0;
  child.on('message', (m) => {
    const w = waiting.get(m.id);
    if (!w) return;
    waiting.delete(m.id);
    if (m.error) w.reject(new Error(m.error));
    else w.resolve(m.result);
  });
  await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`the simulated nodes exited (${code})`)));
  });
  return {
    pid: child.pid,
    ask: (op, args = {}) =>
      new Promise((resolve, reject) => {
        const id = next++;
        waiting.set(id, { resolve, reject });
        child.send({ id, op, ...args });
      }),
  };
}

async function nodesByStatus() {
  const res = await api.call('nodes', 'GET', '/v1/nodes');
  const counts = { ready: 0, draining: 0, lost: 0 };
  for (const n of res.body?.nodes ?? []) counts[n.status]++;
  return counts;
}

async function waitFor(check, timeoutMs, what) {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

function progress(message) {
  console.error(`# ${message}`);
}

function printReport({ levels, curve, controlPlaneKilled }) {
  const f = (v, d = 1) => (Number.isFinite(v) ? v.toFixed(d) : '-');
  const rows = levels.map((l) => [
    String(l.sessions),
    String(l.nodes),
    f(l.creates.perSec, 0),
    `${f(l.creates.median)} / ${f(l.creates.p99)}`,
    `${f(l.mix.latency.exec?.median)} / ${f(l.mix.latency.exec?.p99)}`,
    f(l.overheadMs.median, 2),
    f(l.mix.statementsPerCall),
    `${f(l.idle.statementsPerSec, 0)} / ${f(l.mix.statementsPerSec, 0)}`,
    `${l.idle.controlPlaneCpu.map((c) => f(c * 100, 0)).join('+')}% / ${l.mix.controlPlaneCpu.map((c) => f(c * 100, 0)).join('+')}%`,
    `${f(l.idle.postgresCpu * 100, 0)}% / ${f(l.mix.postgresCpu * 100, 0)}%`,
    `${f(l.idle.simulatorCpu * 100, 0)}+${f(l.idle.harnessCpu * 100, 0)}% / ${f(l.mix.simulatorCpu * 100, 0)}+${f(l.mix.harnessCpu * 100, 0)}%`,
    l.mix.controlPlaneRssMb.map((m) => f(m, 0)).join('/'),
    l.maintenance.map((m) => `${f(m.passSec, 2)} s (${m.passSessions})`).join(', '),
    `${l.overdue.sessions} (${f(l.overdue.lateSec)} s)`,
    f((l.idle.nodeCallsPerSec.volumeChanged ?? 0) + (l.idle.nodeCallsPerSec['sandbox GET /processes'] ?? 0)),
    l.maintenance.map((m) => f(m.metricsMs, 0)).join('/'),
    `${l.loss.moved} of ${l.loss.sessions}: ${f(l.loss.detectedMs / 1000)} s + ${f(l.loss.movedMs / 1000)} s${l.loss.failed ? `, ${l.loss.failed} failed` : ''}`,
    `${l.frozen.moved} of ${l.frozen.sessions}: ${f(l.frozen.detectedMs / 1000)} s + ${f(l.frozen.movedMs / 1000)} s (calls ended ${f(l.frozen.cutFirstMs / 1000)}–${f(l.frozen.cutMs / 1000)} s)${l.frozen.failed ? `, ${l.frozen.failed} failed` : ''}`,
  ]);
  const header = [
    'sessions',
    'nodes',
    'creates/s',
    'create p50/p99 ms',
    'exec p50/p99 ms (mix)',
    'CP ms per exec',
    'stmts/call',
    'stmts/s idle/mix',
    'CP CPU idle/mix',
    'PG CPU idle/mix',
    'simulated nodes + load CPU idle/mix',
    'CP RSS MB',
    'maintenance pass (sessions)',
    'overdue > 1 tick (latest)',
    'nodes asked about volumes or processes /s idle',
    '/metrics ms',
    'node lost: sessions moved, detected + all answering',
    'node frozen, calls waiting: sessions moved, detected + all answering',
  ];
  console.log(`| ${header.join(' | ')} |`);
  console.log(`|${header.map(() => '---').join('|')}|`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  for (const l of levels) if (Object.keys(l.errors).length) console.log(`errors at ${l.sessions}: ${JSON.stringify(l.errors)}`);
  if (curve.length) {
    console.log('\n| control planes | execs/s | CP CPU | PG CPU | stmts/s |\n|---|---|---|---|---|');
    for (const p of curve)
      console.log(
        `| ${p.controlPlanes} | ${f(p.execsPerSec, 0)} | ${p.controlPlaneCpu.map((c) => f(c * 100, 0)).join('+')}% | ${f(p.postgresCpu * 100, 0)}% | ${f(p.statementsPerSec, 0)} |`,
      );
  }
  if (controlPlaneKilled) {
    const k = controlPlaneKilled;
    console.log(
      `\na control plane killed (${k.settled.overdue} overdue when it was, ${f(k.settled.sec)} s after the node loss): sessions overdue by more than a tick, at most ${k.handover.sessions} during the handover (${f(k.handover.lateSec)} s the latest) and ${k.after.sessions} after it (${f(k.after.lateSec)} s); survivors' passes up to ${f(k.longestPassSec, 2)} s, ${k.mostPassSessions} sessions`,
    );
  }
}
