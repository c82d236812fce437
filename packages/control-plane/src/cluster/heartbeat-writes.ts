import { WriteWindow } from '@space/server-kit';
import { type HeartbeatRow, type Store, inIdOrder } from '../store/store.js';

/** How long a heartbeat's row waits for others to be written with it: a heartbeat comes every 2 s, and a node is lost after 10 s without one. */
export const heartbeatWriteWindowMs = 100;

/** The most rows one statement writes (8 values each: well inside both databases' bound on a statement's parameters). */
const maxRowsPerWrite = 500;

/**
 * The heartbeats a control plane receives, written to the store together: 1,000 nodes beat 500
 * times a second, and each alone was a statement and a commit (a flush of PostgreSQL's log). The
 * rows that arrive within `windowMs` of the first are written in one statement, and each heartbeat
 * is answered only once its row is committed, so an acknowledged heartbeat is in the store as it
 * was when each wrote its own.
 */
export class HeartbeatWrites {
  private readonly window: WriteWindow<HeartbeatRow, void>;

  constructor(store: Pick<Store, 'recordHeartbeats'>, windowMs = heartbeatWriteWindowMs) {
    this.window = new WriteWindow(
      async (rows) => {
        // A node that beat twice within the window: its newest row. Rows in the order of their id, so two
        // control planes' statements lock the rows they share in one order and never wait on each other in a cycle.
        const newest = new Map(rows.map((row) => [row.id, row]));
        await store.recordHeartbeats([...newest.values()].sort(inIdOrder));
        return rows.map(() => undefined);
      },
      windowMs,
      maxRowsPerWrite,
    );
  }

  /** Resolves once `row` is committed (with the rows that came within the window), rejects with the write's error. */
  write(row: HeartbeatRow): Promise<void> {
    return this.window.add(row);
  }
}
