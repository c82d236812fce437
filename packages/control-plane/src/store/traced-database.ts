import { inSpan } from '@space/server-kit';
import type { SqlDatabase, SqlExecutor, SqlValue } from './sql-database.js';

/** A statement's span: `SELECT sessions`, its text (cut short) as OpenTelemetry's `db.query.text`. */
function spanOf(sql: string): [string, Record<string, string>] {
  const verb = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? 'SQL';
  const table = /\b(?:FROM|INTO|UPDATE|TABLE)\s+(\w+)/i.exec(sql)?.[1];
  return [table ? `${verb} ${table}` : verb, { 'db.query.text': sql.replace(/\s+/g, ' ').slice(0, 300) }];
}

function traced(executor: SqlExecutor): SqlExecutor {
  return {
    run: (sql: string, params?: SqlValue[]) => inSpan(...spanOf(sql), () => executor.run(sql, params)),
    get: <T>(sql: string, params?: SqlValue[]) => inSpan(...spanOf(sql), () => executor.get<T>(sql, params)),
    all: <T>(sql: string, params?: SqlValue[]) => inSpan(...spanOf(sql), () => executor.all<T>(sql, params)),
  };
}

/** The store's database with a span per statement and transaction in a traced call (`OTEL_EXPORTER_OTLP_ENDPOINT` set). */
export function tracedDatabase(db: SqlDatabase): SqlDatabase {
  return {
    ...traced(db),
    changesInWith: db.changesInWith,
    transaction: (work) => inSpan('transaction', {}, () => db.transaction((tx) => work(traced(tx)))),
    background: (work) => db.background(work),
    connections: () => db.connections(),
    close: () => db.close(),
  };
}
