// The read of unused ship bases (`Store.unusedShipBases`, the once-a-minute sweep's) on a real
// PostgreSQL at scale: N sessions, each with its base and 3 checkpoints stored against it, a tenth of
// them with an older base since replaced, and N/10 bases of deleted sessions (retired as migration
// 32 retires them); timed as the store reads it now (the retired bases) and as it read them before
// (every base, checkpoint and session).
// Usage: ./space script bench/unused-bases.mjs [--sessions 100000] [--runs 10]
// Prints a table, writes JSON to bench/results.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startLocalPostgres } from '../packages/control-plane/dist/store/local-postgres.js';
import { migrations } from '../packages/control-plane/dist/store/migrations.js';
import { openPostgresStore } from '../packages/control-plane/dist/store/open-store.js';
import { session } from '../packages/control-plane/dist/test-support/store-rows.js';
import { numberOption } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const args = process.argv.slice(2);
const sessions = numberOption(args, '--sessions', 100000);
const runs = numberOption(args, '--runs', 10);

const postgres = await startLocalPostgres();
const { results, rows, record } = recorder();
try {
  const url = await postgres.url('unused_bases');
  const store = await openPostgresStore(url);
  let db = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    await store.insertSession(session('ses_template0', 'tn_a'));
    // Rows made in bulk without the counters' triggers (the counters are not what is measured).
    await db.query("ALTER DATABASE unused_bases SET session_replication_role = 'replica'");
    await db.end();
    db = new pg.Pool({ connectionString: url, max: 2 });
    // Copies of the one row, each with an id of its own.
    const columns = (await db.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'sessions' ORDER BY ordinal_position")).rows.map(
      (r) => r.column_name,
    );
    const copy = columns.map((c) => (c === 'id' ? "'ses_' || g" : c)).join(', ');
    await db.query(`INSERT INTO sessions (${columns.join(', ')}) SELECT ${copy} FROM sessions, generate_series(1, ${sessions}) g WHERE id = 'ses_template0'`);
    const base = (id, sessionId, at) => `SELECT ${id}, ${sessionId}, '{"key":"k","bytes":1,"sha256":"${'0'.repeat(64)}"}', ${at}`;
    await db.query(
      `INSERT INTO ship_bases (id, session_id, object, created_at) ${base("'bse_' || g", "'ses_' || g", "'2026-01-02T00:00:00Z'")} FROM generate_series(1, ${sessions}) g`,
    );
    await db.query(
      `INSERT INTO ship_bases (id, session_id, object, created_at) ${base("'bse_old' || g", "'ses_' || g", "'2026-01-01T00:00:00Z'")} FROM generate_series(1, ${sessions / 10}) g`,
    );
    await db.query(
      `INSERT INTO ship_bases (id, session_id, object, created_at) ${base("'bse_gone' || g", "'ses_gone' || g", "'2026-01-01T00:00:00Z'")} FROM generate_series(1, ${sessions / 10}) g`,
    );
    await db.query(
      `INSERT INTO checkpoints (id, session_id, tenant_id, kind, trigger, node_id, created_at, shipped_base_id)
       SELECT 'ckp_' || g || '_' || n, 'ses_' || g, 'tn_a', 'fs', 'auto', 'node-1', '2026-01-02T00:00:00Z', 'bse_' || g FROM generate_series(1, ${sessions}) g, generate_series(1, 3) n`,
    );
    await db.query(migrations.find((m) => m.version === 32).statements('postgres')[1]);
    await db.query('ANALYZE');
    const time = async (variant, read) => {
      let found = 0;
      const ms = [];
      await read(); // not counted: caches warm
      for (let i = 0; i < runs; i++) {
        const t = performance.now();
        found = (await read()).length;
        ms.push(performance.now() - t);
      }
      record(`unused ship bases read, ${variant}`, ms);
      return found;
    };
    const now = () => store.unusedShipBases();
    const before = `SELECT b.* FROM ship_bases b
       WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.shipped_base_id = b.id)
         AND (NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = b.session_id)
              OR EXISTS (SELECT 1 FROM ship_bases n WHERE n.session_id = b.session_id AND (n.created_at > b.created_at OR (n.created_at = b.created_at AND n.id > b.id))))
       ORDER BY b.created_at, b.id`;
    const earlier = async () => (await db.query(before)).rows;
    const found = await time('retired ones (migration 32), a backlog to collect', now);
    const foundBefore = await time('every base, checkpoint and session (before), a backlog to collect', earlier);
    if (found !== foundBefore) throw new Error(`the two reads disagree: ${found} and ${foundBefore} unused bases`);
    // The steady state: each sweep collected what the last one found.
    await db.query('DELETE FROM ship_bases b WHERE retired = 1 AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.shipped_base_id = b.id)');
    await db.query('ANALYZE');
    await time('retired ones (migration 32), nothing to collect', now);
    await time('every base, checkpoint and session (before), nothing to collect', earlier);
    console.log(`${sessions} sessions, ${sessions * 3} checkpoints, ${sessions * 1.2} bases of which ${found} unused; ${runs} reads each`);
  } finally {
    await db.end();
    await store.close();
  }
} finally {
  await postgres.stop();
}
printTable(rows);
const out = path.join(path.dirname(fileURLToPath(import.meta.url)), 'results', `unused-bases-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
mkdirSync(path.dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify({ sessions, runs, results }, null, 2));
console.log(`JSON in ${out}`);
