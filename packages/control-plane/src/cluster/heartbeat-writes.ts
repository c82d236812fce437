import type { HeartbeatRow, Store } from '../store/store.js';

/** How long a heartbeat's row waits for others to be written with it: a heartbeat comes every 2 s, and a node is lost after 10 s without one. */
export const heartbeatWriteWindowMs = 100;

/** The most rows one statement writes (8 values each: well inside both databases' bound on a statement's parameters). */
const maxRowsPerWrite = 500;

interface Waiting {
  row: HeartbeatRow;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The heartbeats a control plane receives, written to the store together: 1,000 nodes beat 500
 * times a second, and each alone was a statement and a commit (a flush of PostgreSQL's log). The
 * rows that arrive within `windowMs` of the first are written in one statement, and each heartbeat
 * is answered only once its row is committed, so an acknowledged heartbeat is in the store as it
 * was when each wrote its own.
 */
export class HeartbeatWrites {
  private waiting: Waiting[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly store: Pick<Store, 'recordHeartbeats'>,
    private readonly windowMs = heartbeatWriteWindowMs,
  ) {}

  /** Resolves once `row` is committed (with the rows that came within the window), rejects with the write's error. */
  write(row: HeartbeatRow): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ row, resolve, reject });
      this.timer ??= setTimeout(() => this.flush(), this.windowMs);
    });
  }

  private flush(): void {
    this.timer = null;
    const batch = this.waiting;
    this.waiting = [];
    for (let i = 0; i < batch.length; i += maxRowsPerWrite) this.writeTogether(batch.slice(i, i + maxRowsPerWrite));
  }

  private writeTogether(batch: Waiting[]): void {
    // A node that beat twice within the window: its newest row. Rows in the order of their id, so two
    // control planes' statements lock the rows they share in one order and never wait on each other in a cycle.
    const newest = new Map(batch.map((w) => [w.row.id, w.row]));
    const rows = [...newest.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this.store.recordHeartbeats(rows).then(
      () => {
        for (const w of batch) w.resolve();
      },
      (err: unknown) => {
        for (const w of batch) w.reject(err);
      },
    );
  }
}
