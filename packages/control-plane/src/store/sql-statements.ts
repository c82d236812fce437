import type { SqlStatement, SqlValue } from './sql-database.js';
import type { SandboxHistoryRow, SessionLeaseRow } from './store.js';

// Statements the store builds to run alone or inside another (a change in a `WITH` clause on PostgreSQL).

/** A session's new lease (of a session no one else can know yet: no conflict to settle). */
export function leaseInsert(lease: SessionLeaseRow): SqlStatement {
  return {
    sql: 'INSERT INTO session_leases (session_id, holder, operation, expires_at) VALUES (?, ?, ?, ?)',
    params: [lease.sessionId, lease.holder, lease.operation, lease.expiresAt],
  };
}

/** The release of the session's lease, if `holder` holds it (a later holder's is left). */
export function leaseRelease(sessionId: string, holder: string): SqlStatement {
  return { sql: 'DELETE FROM session_leases WHERE session_id = ? AND holder = ?', params: [sessionId, holder] };
}

/**
 * A sandbox's start in the session's history (recorded again, it stays one entry); its values
 * selected from `from` when given (a row there: the start is recorded, none: it is not).
 */
export function historyStart(start: SandboxHistoryRow, from?: string): SqlStatement {
  const values = '?, ?, ?, ?, NULL, NULL, ?, ?';
  return {
    sql: `INSERT INTO sandbox_history (id, session_id, node_id, started_at, ended_at, end_reason, restored_from, note) ${from ? `SELECT ${values} FROM ${from}` : `VALUES (${values})`} ON CONFLICT (id) DO NOTHING`,
    params: [start.id, start.sessionId, start.nodeId, start.startedAt, start.restoredFrom, start.note],
  };
}

/**
 * The update setting the patch's fields of row `id` of `table` (`columns` names each field's column;
 * `json` ones are stored as JSON text), only where `also` holds; null for an empty patch.
 */
export function updateStatement<P extends object>(
  table: string,
  columns: Record<keyof P, string>,
  id: string,
  patch: P,
  json: ReadonlySet<keyof P> = new Set(),
  also?: { column: string; value: SqlValue },
): SqlStatement | null {
  const keys = Object.keys(patch) as (keyof P)[];
  if (keys.length === 0) return null;
  const value = (k: keyof P) => (json.has(k) ? JSON.stringify(patch[k]) : ((patch[k] as SqlValue | undefined) ?? null));
  const where = also ? `WHERE id = ? AND ${also.column} = ?` : 'WHERE id = ?';
  return {
    sql: `UPDATE ${table} SET ${keys.map((k) => `${columns[k]} = ?`).join(', ')} ${where}`,
    params: [...keys.map(value), id, ...(also ? [also.value] : [])],
  };
}
