import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from './platform.js';

/** What bench/scale.mjs reports of one level (the fields this test reads). */
interface ScaleLevel {
  sessions: number;
  active: number;
  creates: {
    perSec: number;
    n: number;
    use: { monotonicUs: [number, number] };
    statementsTop: { byTime: { calls: number }[]; byCalls: { calls: number }[] };
  };
  overheadMs: { throughControlPlane: { median: number }; direct: { median: number } };
  mix: { callsPerSec: number; statementsPerCall: number; latency: Record<string, { n: number; median: number }>; simulatorCpu: number; harnessCpu: number };
  errors: Record<string, { count: number; example: string }>;
  maintenance: { passSec: number; passSessions: number; passes: number; visits: number }[];
  overdue: {
    sessions: number;
    samples: number;
    byPhase: Record<string, { sessions: number }>;
    timeline: {
      atSec: number;
      phase: string;
      sessions: number;
      passes?: { passes: number; connectionsBusy: number; statementsWaiting: number; backgroundBusy: number; backgroundWaiting: number }[];
    }[];
  };
  loss: NodeLoss;
  frozen: NodeLoss & { cutFirstMs: number; cutMs: number };
}

interface NodeLoss {
  sessions: number;
  moved: number;
  unmovable: number;
  failed: number;
  detectedMs: number;
}

/** Errors the control plane answers for what a misbehaving or lost node did; anything else is a fault of the control plane. */
const nodeFaults = /^(DAEMON_PROTOCOL_ERROR|NODE_UNAVAILABLE|SANDBOX_UNAVAILABLE|SANDBOX_DIED|SESSION_NOT_RUNNING)$/;

test('the scale harness, small: real control planes on PostgreSQL with simulated nodes (some misbehaving) serve the mix, maintain, and move the sessions of a lost node and of a frozen one', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-scale-smoke-'));
  try {
    const out = path.join(dir, 'scale.json');
    const profiles = path.join(dir, 'profiles');
    const child = spawn(process.execPath, [path.join(repoRoot, 'bench/scale.mjs'), '--smoke', '--json', out, '--cpu-prof', profiles], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, output);
    const report = JSON.parse(readFileSync(out, 'utf8')) as { levels: ScaleLevel[]; controlPlaneKilled: { passes: { passes: number }[] } };
    const [level] = report.levels as [ScaleLevel];

    assert.ok(level.sessions >= 180 && level.sessions <= 220, `about 200 sessions: ${level.sessions}`);
    assert.ok(level.active > 0 && level.active < level.sessions / 2, `most of them paused or stopped: ${level.active} active`);
    assert.ok(level.creates.perSec > 0);
    for (const op of ['exec', 'files/stat', 'get session', 'create'])
      assert.ok(level.mix.latency[op]?.n, `the mix ran ${op}: ${JSON.stringify(level.mix.latency)}`);
    assert.ok(Number.isFinite(level.mix.statementsPerCall) && level.mix.statementsPerCall > 0, 'statements counted by pg_stat_statements');
    assert.ok(
      level.overheadMs.throughControlPlane.median > level.overheadMs.direct.median,
      'an exec through a control plane takes longer than on the node itself',
    );

    // Misbehaving nodes cost some calls, with the errors a real node's faults get; nothing else failed.
    const calls = Object.values(level.mix.latency).reduce((n, s) => n + s.n, 0);
    let failures = 0;
    for (const [key, { count, example }] of Object.entries(level.errors)) {
      const errorCode = key.split(' ').at(-1)!;
      assert.match(errorCode, nodeFaults, `${key}: ${example}`);
      if (!key.startsWith('exec after node ')) failures += count;
    }
    assert.ok(failures < calls * 0.1, `${failures} failed calls of ${calls}: ${JSON.stringify(level.errors)}`);

    // Both control planes maintained their share, visiting sessions as they came due; the harness watched for overdue ones.
    assert.equal(level.maintenance.length, 2);
    for (const m of level.maintenance) assert.ok(Number.isFinite(m.passSec) && m.passes > 0 && m.visits > 0, JSON.stringify(level.maintenance));
    assert.ok(level.overdue.samples > 10 && Number.isInteger(level.overdue.sessions), JSON.stringify(level.overdue));
    // Sampled through the idle and the mix, each sample kept, the passes read along.
    assert.deepEqual(Object.keys(level.overdue.byPhase), ['idle', 'mix']);
    assert.equal(level.overdue.timeline.length, level.overdue.samples);
    const read = level.overdue.timeline.flatMap((s) => s.passes ?? []);
    assert.ok(read.length >= 2, "the control planes' passes in the timeline");
    // Each control plane's connections to PostgreSQL, the calls' pool and maintenance's, from its /metrics.
    for (const p of read)
      assert.ok(
        [p.connectionsBusy, p.statementsWaiting, p.backgroundBusy, p.backgroundWaiting].every((n) => n >= 0),
        JSON.stringify(p),
      );
    // The load's own processes are measured: on a machine they saturate, every call is slow whatever the control planes do.
    assert.ok(level.mix.simulatorCpu > 0 && level.mix.harnessCpu > 0, `simulated nodes ${level.mix.simulatorCpu}, harness ${level.mix.harnessCpu}`);

    // The lost node: seen lost after SPACE_NODE_LOST_AFTER_SEC (10 s); every session with a shipped checkpoint answers from another node.
    assert.ok(level.loss.sessions > 0);
    assert.ok(level.loss.detectedMs > 7_000 && level.loss.detectedMs < 20_000, `detected after ${level.loss.detectedMs} ms`);
    assert.equal(level.loss.failed, 0, JSON.stringify(level.loss));
    assert.equal(level.loss.moved + level.loss.unmovable, level.loss.sessions);
    // A node frozen with a call of each of its sessions waiting on it: the calls end about a second after its detection
    // (control planes look at silent nodes every second), and every session with a shipped checkpoint answers from another node.
    const { frozen } = level;
    assert.ok(frozen.sessions > 0 && frozen.failed === 0 && frozen.moved + frozen.unmovable === frozen.sessions, JSON.stringify(frozen));
    assert.ok(
      frozen.detectedMs > 7_000 && frozen.cutFirstMs < 4_000 && frozen.cutMs < 8_000,
      `detected after ${frozen.detectedMs} ms, its calls ended ${frozen.cutFirstMs}–${frozen.cutMs} ms after`,
    );

    // Where the fill's time went: PostgreSQL's statements, and the surviving control plane's CPU profile over the fill's window.
    assert.ok(level.creates.statementsTop.byCalls.length > 0 && level.creates.statementsTop.byTime.length > 0);
    const [profile, ...others] = readdirSync(profiles);
    assert.ok(profile?.endsWith('.cpuprofile') && others.length === 0, `one profile, the killed control plane's none: ${readdirSync(profiles)}`);
    const [from, to] = level.creates.use.monotonicUs;
    const summary = JSON.parse(
      execFileSync(
        process.execPath,
        [path.join(repoRoot, 'bench/cpu-profile.mjs'), path.join(profiles, profile), '--from', `${from}`, '--to', `${to}`, '--json'],
        {
          encoding: 'utf8',
        },
      ),
    ) as { windowMs: number; places: { name: string }[] };
    assert.ok(summary.windowMs > 0 && summary.windowMs <= (to - from) / 1000 + 50, `the fill's window sampled: ${summary.windowMs} ms`);
    assert.ok(
      summary.places.some((p) => p.name.startsWith('control-plane/')),
      JSON.stringify(summary.places),
    );

    // A control plane killed: the survivor goes on passing.
    assert.ok(
      report.controlPlaneKilled.passes.length > 2 && report.controlPlaneKilled.passes.every((p) => p.passes > 0),
      JSON.stringify(report.controlPlaneKilled),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
