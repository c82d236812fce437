// Database statements per control-plane operation, counted on the real store code (SQLite engine:
// the statements are the same on PostgreSQL) with the services wired as in the control plane, on a
// node stand-in. The numbers docs/scale.md extrapolates from.
// Usage: node bench/store-queries.mjs
import { CreateSessionRequestSchema } from '../packages/protocol/dist/index.js';
import { SqlStore } from '../packages/control-plane/dist/store/sql-store.js';
import { SqliteDatabase } from '../packages/control-plane/dist/store/sqlite-database.js';
import { servicesOnFakeNode } from '../packages/control-plane/dist/test-support/services.js';
import { countedDatabase } from './counted-statements.mjs';

const counted = countedDatabase(await SqliteDatabase.open(':memory:'));
const s = await servicesOnFakeNode({}, new SqlStore(counted.db));
const caller = s.caller;
const counts = {};
async function count(name, fn) {
  // Background writes of the step before land first: its batch of activity, anything else it left running.
  await s.activity.flush();
  await new Promise((r) => setTimeout(r, 20));
  const before = counted.count();
  await fn();
  counts[name] = counted.count() - before;
}

const request = CreateSessionRequestSchema.parse({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
let session;
await count('create a session', async () => (session = await s.sessions.create(caller, request)));
// As the public API serves an exec: the route reads the session with its lease (a 404 before the body), and the call runs on its sandbox with that read.
const exec = async () => {
  const read = await s.sessions.rowWithLease(caller, session.id);
  await s.calls.withSandbox(caller, session.id, { repeatable: true, read }, async () => undefined);
};
await count('exec (a call on a running sandbox), after authentication', exec);
await count('the uses of 100 sessions recorded (one batch of activity)', async () => {
  for (let i = 0; i < 100; i++) s.activity.begin(`ses_batch${i}`)();
  await s.activity.flush();
});
const { key } = await s.auth.createKey(caller.tenantId);
const keyRequest = { method: 'GET', url: '/v1/sessions', headers: { authorization: `Bearer ${key}` } };
await count('authenticate a request, key not seen lately (a store read)', () => s.auth.authenticate({ ...keyRequest }));
await count('authenticate a request, key seen within SPACE_AUTH_CACHE_SEC', () => s.auth.authenticate({ ...keyRequest }));
await count('GET a session (with history and checkpoints)', () => s.sessions.get(caller, session.id));
await count('list sessions', () => s.sessions.list(caller));
await count('fs checkpoint', () => s.checkpoints.create(caller, session.id, 'fs'));
await count('fork x1', () => s.checkpoints.fork(caller, s.node.checkpoints.values().next().value, 1));
await count('kill the sandbox', () => s.sessions.killSandbox(caller, session.id));
await count('resume (exec after the sandbox died)', () => s.calls.withSandbox(caller, session.id, { repeatable: true }, async () => undefined));
await count('node heartbeat', () =>
  s.nodes.heartbeat({ id: s.node.nodeId, url: 'https://x.invalid', token: 'fake-node-token-0', capacity: { memoryMb: 4096, cpus: 2 }, sandboxes: 2 }),
);
const sessionsNow = Object.values(await s.store.countSessionsByStatus()).reduce((a, b) => a + b, 0);
await count(`maintenance pass (${sessionsNow} sessions, each visited the first time: its next visit worked out)`, () => s.maintenance.tick());
await count(`maintenance pass (${sessionsNow} sessions, nothing due)`, () => s.maintenance.tick());
await count('delete a session', () => s.sessions.delete(caller, session.id));

console.log('| operation | statements |\n|---|---|');
for (const [name, n] of Object.entries(counts)) console.log(`| ${name} | ${n} |`);
console.log(JSON.stringify(counts));
