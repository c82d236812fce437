// The maintenance pass against the number of sessions in the store: a real PostgreSQL (started for
// the run, on loopback), the control plane's services wired as in the control plane on a node
// stand-in, a few running sessions, and more and more sessions without a sandbox (stopped: nothing
// due for them). The floor is the pass with the running sessions alone, in the same run; each level
// is reported as its ratio to it, with the statements a pass makes. The database is analyzed after
// each fill, as autovacuum would have.
// (How control planes split the nodes between them is measured by bench/scale.mjs, on many nodes.)
// Usage: ./space script bench/maintenance-scale.mjs [--levels 0,1000,10000,50000] [--runs 5] [--running 20]
import { parseArgs } from 'node:util';
import { CreateSessionRequestSchema, newId } from '../packages/protocol/dist/index.js';
import { PostgresDatabase } from '../packages/control-plane/dist/store/postgres-database.js';
import { SqlStore } from '../packages/control-plane/dist/store/sql-store.js';
import { startLocalPostgres } from '../packages/control-plane/dist/store/local-postgres.js';
import { servicesOnFakeNode } from '../packages/control-plane/dist/test-support/services.js';
import { countedDatabase } from './counted-statements.mjs';
import { printTable, recorder, summarize } from './stats.mjs';

const { values } = parseArgs({
  options: { levels: { type: 'string', default: '0,1000,10000,50000' }, runs: { type: 'string', default: '5' }, running: { type: 'string', default: '20' } },
});
const levels = values.levels.split(',').map(Number);
const runs = Number(values.runs);

const postgres = await startLocalPostgres();
const db = await PostgresDatabase.open(await postgres.url('maintenance_scale'));
const counted = countedDatabase(db);
const store = new SqlStore(counted.db);
try {
  const s = await servicesOnFakeNode({}, store);
  const request = CreateSessionRequestSchema.parse({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const running = [];
  for (let i = 0; i < Number(values.running); i++) running.push(await s.sessions.create(s.caller, request));
  const model = await s.store.findSession(running[0].id);
  /** `runs` maintenance passes, each after the node stand-in's heartbeat (filling the store outlasts the lost delay) and `before`: their times, and the statements of the last. */
  const timePasses = async (before = async () => undefined) => {
    const samples = [];
    let statements = 0;
    for (let r = 0; r < runs; r++) {
      await before();
      await s.nodes.heartbeat({
        id: s.node.nodeId,
        url: 'https://fake-node.invalid',
        token: 'fake-node-token-0',
        capacity: { memoryMb: 4096, cpus: 2 },
        sandboxes: running.length,
      });
      const at = counted.count();
      const t0 = performance.now();
      await s.maintenance.tick();
      samples.push(performance.now() - t0);
      statements = counted.count() - at;
    }
    return { samples, statements };
  };
  const { results, rows, record } = recorder();
  let inStore = 0;
  const statementsPerPass = {};
  for (const level of levels) {
    const started = performance.now();
    for (; inStore < level; inStore++)
      await s.store.insertSession({
        ...model,
        id: newId('ses'),
        status: 'stopped',
        sandboxId: null,
        nodeId: null,
        sandboxStartedAt: null,
        volumeNodeId: s.node.nodeId,
      });
    const filledMs = performance.now() - started;
    // As autovacuum does on a database that grew: the planner's statistics see the rows.
    await db.run('ANALYZE sessions');
    const { samples, statements } = await timePasses();
    statementsPerPass[level] = statements;
    record(`pass, ${running.length} running + ${level} stopped`, samples);
    console.error(`# ${level} stopped sessions (${Math.round(filledMs)} ms to add): pass median ${summarize(samples).median.toFixed(1)} ms`);
  }
  printTable(rows);
  const floor = results[`pass, ${running.length} running + 0 stopped`]?.median;
  console.log('\n| stopped sessions | pass median (ms) | P90 (ms) | vs. floor | statements per pass |\n|---|---|---|---|---|');
  for (const level of levels) {
    const r = results[`pass, ${running.length} running + ${level} stopped`];
    console.log(`| ${level} | ${r.median.toFixed(1)} | ${r.p90.toFixed(1)} | ${floor ? (r.median / floor).toFixed(2) : '-'} | ${statementsPerPass[level]} |`);
  }
  console.log(JSON.stringify({ running: running.length, runs, floorMs: floor, statementsPerPass, results }));
  await s.maintenance.stop?.();
} finally {
  await store.close().catch(() => undefined);
  await postgres.stop();
}
