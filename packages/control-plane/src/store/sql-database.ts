/** A value bound to a `?` placeholder. */
export type SqlValue = string | number | null;

/** A statement with its parameters, made to be run later or inside another. */
export interface SqlStatement {
  sql: string;
  params: SqlValue[];
}

/**
 * The statements the store runs, in the SQL both engines speak: `?` placeholders (the PostgreSQL
 * driver numbers them), TEXT/INTEGER/BIGINT columns, `ON CONFLICT` upserts.
 */
export interface SqlExecutor {
  /** Runs a statement; returns how many rows it changed. */
  run(sql: string, params?: SqlValue[]): Promise<number>;
  get<T>(sql: string, params?: SqlValue[]): Promise<T | undefined>;
  all<T>(sql: string, params?: SqlValue[]): Promise<T[]>;
}

/** A pool's connections now, and the statements waiting for one. */
export interface ConnectionUse {
  busy: number;
  idle: number;
  /** Statements and transactions waiting for a connection: the pool, not the server, is what they wait for. */
  waiting: number;
}

/** The connections of both pools: the calls' and the background work's (see `SqlDatabase.background`). */
export interface PoolUse {
  calls: ConnectionUse;
  background: ConnectionUse;
}

/** A database engine under the store: SQLite in the data directory, or a PostgreSQL server. */
export interface SqlDatabase extends SqlExecutor {
  /** Runs `work` in one transaction: committed if it returns, rolled back if it throws. */
  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * Runs `work` with every statement it makes (and whatever it starts makes) on the connections kept
   * for background work, maintenance's: they never wait behind the calls' statements for a connection,
   * nor the calls behind theirs. SQLite has no connections to wait for: `work` just runs.
   */
  background<T>(work: () => Promise<T>): Promise<T>;
  /**
   * Whether a statement may change rows in its WITH clause, so that changes to several tables are
   * one statement and one round trip to the server (PostgreSQL). SQLite has no such clause and no
   * round trips to save: there they are a transaction.
   */
  readonly changesInWith: boolean;
  /** Its pools' connections now; null for one without a pool (SQLite runs every statement in the process). */
  connections(): PoolUse | null;
  close(): Promise<void>;
}
