import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runChaos } from './harness/chaos.js';

/** A small chaos run (`node bench/chaos.mjs` runs the large one): every acknowledged record is accounted for. */
test('chaos: busy sessions through sandbox and platform SIGKILLs lose no acknowledged record, and all answer', { timeout: 600_000 }, async () => {
  const seed = Number(process.env.SPACE_CHAOS_SEED ?? Date.now() % 1e9);
  const report = await runChaos({ sessions: 3, sandboxKills: 12, platformKills: 2, faultIntervalMs: 1500, seed, log: (l) => process.stderr.write(`${l}\n`) });
  const { accounts, ...summary } = report;
  process.stderr.write(`chaos (SPACE_CHAOS_SEED=${seed} replays the faults): ${JSON.stringify(summary)}\n`);
  const details = JSON.stringify(accounts.map((a) => ({ id: a.id, lost: a.lost.slice(0, 20), missing: a.missingFromCheckpoints.slice(0, 20) })));
  assert.equal(report.platformKills, 2);
  assert.ok(report.sandboxKills >= 6, `${report.sandboxKills} sandbox kills landed`);
  assert.ok(report.acknowledged >= 60, `${report.acknowledged} records acknowledged`);
  // Few survive a short run: after each platform SIGKILL, leases the dead process held keep maintenance off those sessions for up to 15 s.
  assert.ok(report.checkpoints >= 1, `${report.checkpoints} checkpoints to account against`);
  assert.equal(report.missingFromCheckpoints, 0, details);
  assert.equal(report.lost, 0, details);
  assert.equal(report.sessionsAnswering, report.sessions);
});
