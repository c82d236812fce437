import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ChaosOptions, type ChaosReport, runChaos } from './harness/chaos.js';

/** Runs a small chaos run (`node bench/chaos.mjs` runs the large ones) and checks that every acknowledged record is accounted for. */
async function smallRun(name: string, options: Omit<ChaosOptions, 'seed' | 'log' | 'platformLog'>): Promise<ChaosReport> {
  const seed = Number(process.env.SPACE_CHAOS_SEED ?? Date.now() % 1e9);
  // The platform's own log, its tail printed if the run fails: what it did is the first thing to read then.
  let platformTail = '';
  const platformLog = (text: string) => (platformTail = (platformTail + text).slice(-platformTailChars));
  try {
    return checked(name, seed, options, await runChaos({ ...options, seed, log: (l) => process.stderr.write(`${l}\n`), platformLog }));
  } catch (err) {
    process.stderr.write(`${name}: the platform's last ${platformTailChars} characters of output:\n${platformTail}\n`);
    throw err;
  }
}

const platformTailChars = 60_000;

function checked(name: string, seed: number, options: Omit<ChaosOptions, 'seed'>, report: ChaosReport): ChaosReport {
  const { accounts, ...summary } = report;
  process.stderr.write(`${name} (SPACE_CHAOS_SEED=${seed} replays the faults): ${JSON.stringify(summary)}\n`);
  const details = JSON.stringify(
    accounts.map((a) => ({
      id: a.id,
      lost: a.lost.slice(0, 20),
      missing: a.missingFromCheckpoints.slice(0, 20),
      liveError: a.liveError,
      evidence: a.evidence,
    })),
  );
  for (const [kind, count] of Object.entries(options.faults)) if (kind !== 'sandbox') assert.equal(report.faults[kind], count, `every ${kind} SIGKILL lands`);
  assert.ok(report.faults.sandbox! >= options.faults.sandbox! / 2, `${report.faults.sandbox} sandbox kills landed`);
  assert.ok(report.acknowledged >= 60, `${report.acknowledged} records acknowledged`);
  assert.ok(report.checkpoints >= 1, `${report.checkpoints} checkpoints to account against`);
  assert.equal(report.sessionsAnswering, report.sessions, details);
  assert.equal(report.missingFromCheckpoints, 0, details);
  assert.equal(report.lost, 0, details);
  assert.deepEqual(report.stuckCalls, []);
  assert.deepEqual(report.twoActingCopies, [], 'no session acts on two nodes');
  return report;
}

test('chaos: busy sessions through sandbox and platform SIGKILLs lose no acknowledged record, and all answer', { timeout: 600_000 }, async () => {
  await smallRun('chaos', { sessions: 3, faults: { sandbox: 12, platform: 2 }, faultIntervalMs: 1500 });
});

test('chaos on a cluster: sandbox, node-agent and control-plane SIGKILLs and node partitions lose no acknowledged record beyond a lost node, leave no session acting twice, and all answer', {
  timeout: 600_000,
}, async () => {
  const report = await smallRun('chaos on a cluster', {
    cluster: true,
    sessions: 3,
    faults: { sandbox: 6, node: 2, controlPlane: 2, partition: 2 },
    faultIntervalMs: 2000,
  });
  assert.equal(
    report.unreadableCheckpoints,
    0,
    `every checkpoint listed is on a node: ${JSON.stringify(report.accounts.map((a) => ({ id: a.id, unreadable: a.unreadable })))}`,
  );
});
