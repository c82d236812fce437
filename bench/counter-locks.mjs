// Session status changes at once on a real PostgreSQL with the counters the database keeps
// (usage-counters.ts): 48 connections change random sessions' statuses (running, idle, stopped,
// every direction), and the changes per second, their latency and the deadlocks PostgreSQL found
// are measured for each way the counter rows can be locked:
//   deferred: as migrated (migration 31: status_counts' rows locked at commit, the two in one order)
//   immediate: as migration 30 left it (locked with the statement, until the transaction ends)
//   old-first: as before migration 30 (locked with the statement, the old status's row first)
//   floor: no status counter at all (the status trigger dropped): what the row updates cost alone
// --hold-ms N puts each change in a transaction held open N ms after its update, as a start's is
// while the control plane sends its history row and its commit (0: each change commits alone).
// Usage: ./space script bench/counter-locks.mjs [--sessions 100000] [--changes 20000] [--rounds 4] [--hold-ms 0]
//   [--variants deferred,immediate,old-first,floor] (each after a round not counted)
// Prints a table, writes JSON to bench/results.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startLocalPostgres } from '../packages/control-plane/dist/store/local-postgres.js';
import { openPostgresStore } from '../packages/control-plane/dist/store/open-store.js';
import { nodeUsageTriggers, statusCountTriggers } from '../packages/control-plane/dist/store/usage-counters.js';
import { session } from '../packages/control-plane/dist/test-support/store-rows.js';
import { numberOption } from './harness.mjs';
import { printTable, recorder, summarize } from './stats.mjs';

const args = process.argv.slice(2);
const sessions = numberOption(args, '--sessions', 100000);
const changes = numberOption(args, '--changes', 20000);
const rounds = numberOption(args, '--rounds', 4);
const holdMs = numberOption(args, '--hold-ms', 0);
const connections = 48;
const statuses = ['running', 'idle', 'stopped'];

const dropStatusTriggers = 'DROP TRIGGER sessions_status_count ON sessions; DROP TRIGGER sessions_status_count_update ON sessions';
/** Migration 26's status triggers again (fired with their statement) in place of the deferred ones. */
async function immediateTriggers(db) {
  await db.query(dropStatusTriggers);
  for (const statement of statusCountTriggers('postgres').filter((s) => s.startsWith('CREATE OR REPLACE TRIGGER'))) await db.query(statement);
}

/** The triggers and functions as each variant has them. */
const variants = {
  deferred: async () => undefined,
  immediate: immediateTriggers,
  'old-first': async (db) => {
    await immediateTriggers(db);
    const functions = [...nodeUsageTriggers('postgres'), ...statusCountTriggers('postgres')].filter((s) => s.startsWith('CREATE OR REPLACE FUNCTION'));
    for (const statement of functions) await db.query(statement);
  },
  floor: async (db) => db.query(dropStatusTriggers),
};

// Which variants, in which order (`--variants immediate,deferred,floor`): each on a database of its own, one after the other.
const variantsAt = args.indexOf('--variants');
const order = variantsAt >= 0 ? args[variantsAt + 1].split(',') : Object.keys(variants);
for (const name of order) if (!variants[name]) throw new Error(`no variant "${name}": ${Object.keys(variants).join(', ')}`);

/** One status change: alone, or in a transaction held open `holdMs` after its update. */
async function change(client, status, id) {
  if (holdMs === 0) return client.query('UPDATE sessions SET status = $1 WHERE id = $2', [status, id]);
  await client.query('BEGIN');
  try {
    await client.query('UPDATE sessions SET status = $1 WHERE id = $2', [status, id]);
    await sleep(holdMs);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

/** `changes` status changes over 48 connections: their latencies, the time they took and the errors by code. */
async function changeStatuses(db, ids) {
  const ms = [];
  const errors = {};
  let sent = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      const client = await db.connect();
      try {
        while (sent < changes) {
          sent++;
          const id = ids[Math.floor(Math.random() * ids.length)];
          const status = statuses[Math.floor(Math.random() * statuses.length)];
          const t = performance.now();
          await change(client, status, id).catch((err) => {
            errors[err.code] = (errors[err.code] ?? 0) + 1;
          });
          ms.push(performance.now() - t);
        }
      } finally {
        client.release();
      }
    }),
  );
  return { ms, seconds: (performance.now() - started) / 1000, errors };
}

const postgres = await startLocalPostgres();
const { results, rows, record } = recorder();
const perVariant = {};
try {
  for (const name of order) {
    const prepare = variants[name];
    const url = await postgres.url(`counters_${name.replace('-', '_')}`);
    const store = await openPostgresStore(url);
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    await store.insertSession(session('ses_template0', 'tn_a'));
    await store.close();
    const db = new pg.Pool({ connectionString: url, max: connections });
    // Copies of the one row, each with an id of the same shape as the control plane's (its last character picks the shard).
    const columns = (await db.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'sessions' ORDER BY ordinal_position")).rows.map(
      (r) => r.column_name,
    );
    const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
    const copy = columns.map((c) => (c === 'id' ? `'ses_' || substr(md5(g::text), 1, 11) || substr('${alphabet}', 1 + g % 36, 1)` : c)).join(', ');
    await db.query(`INSERT INTO sessions (${columns.join(', ')}) SELECT ${copy} FROM sessions, generate_series(1, ${sessions}) g WHERE id = 'ses_template0'`);
    await prepare(db);
    const ids = (await db.query('SELECT id FROM sessions')).rows.map((r) => r.id);
    const all = [];
    const perSec = [];
    const errors = {};
    await changeStatuses(db, ids); // warm-up: caches and the first dead rows, not counted
    for (let round = 0; round < rounds; round++) {
      const done = await changeStatuses(db, ids);
      all.push(...done.ms);
      perSec.push(changes / done.seconds);
      for (const [code, n] of Object.entries(done.errors)) errors[code] = (errors[code] ?? 0) + n;
    }
    await db.end();
    record(`${name}: a status change`, all);
    const deadlocks = errors['40P01'] ?? 0;
    perVariant[name] = { changesPerSec: summarize(perSec), deadlocks, errors };
    console.log(`# ${name}: ${perSec.map((n) => n.toFixed(0)).join(', ')} changes/s by round; deadlocks ${deadlocks}; errors ${JSON.stringify(errors)}`);
  }
} finally {
  await postgres.stop();
}
printTable(rows);
const rate = (name) => perVariant[name].changesPerSec.median;
console.log(
  `\nchanges/s, median of ${rounds} rounds${holdMs ? `, each held ${holdMs} ms` : ''}: ${order
    .map((name) => `${name} ${rate(name).toFixed(0)}${perVariant.floor ? ` (${(rate(name) / rate('floor')).toFixed(2)} of the floor)` : ''}`)
    .join(', ')}`,
);
const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'results');
mkdirSync(dir, { recursive: true });
const file = path.join(dir, `counter-locks-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ sessions, changes, rounds, holdMs, connections, variants: perVariant, results }, null, 2));
console.log(`JSON: ${file}`);
