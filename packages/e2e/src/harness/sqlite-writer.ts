// A writer with acknowledged records, for measuring what a resume rolls back: the e2e test of the
// rollback window and bench/rollback.mjs run it in `base`.

/** Python: commits a row holding its time to /workspace/rows.db every 10 ms, for ever. */
export const sqliteWriter = [
  'import sqlite3, time',
  "db = sqlite3.connect('/workspace/rows.db')",
  "db.execute('create table if not exists rows (at real)')",
  'while True:',
  "    db.execute('insert into rows values (?)', (time.time(),))",
  '    db.commit()',
  '    time.sleep(0.01)',
].join('\n');

/** Python printing `[rows, newest row's time]` as JSON: of every row, or of those written up to `untilAt`. */
export function rowsQuery(untilAt?: number): string {
  const where = untilAt === undefined ? '' : ` where at <= ${untilAt}`;
  return `import json, sqlite3; print(json.dumps(list(sqlite3.connect('/workspace/rows.db').execute('select count(*), max(at) from rows${where}').fetchone())))`;
}
