import { ErrorCode, SpaceError } from '@space/protocol';
import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';
import { applyMigrations } from './migrations.js';
import type { ConnectionUse, PoolUse, SqlDatabase, SqlExecutor, SqlValue } from './sql-database.js';

/** Arbitrary, fixed: the advisory lock every control plane takes to migrate, so two starting at once migrate once. */
const migrationLockKey = 0x5_9ace;

/** int8 (counts, byte sizes, ms timestamps) as numbers: every value the store keeps fits in 2^53. */
const int8Oid = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === int8Oid ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** SQLSTATE classes and socket errors that mean "the server is not there", not "the statement is wrong". */
function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  if (typeof code !== 'string') return /Connection terminated|timeout exceeded when trying to connect/.test((err as Error)?.message ?? '');
  // 08xxx: connection exceptions; 57P01-57P03: the server shutting down or starting; E...: socket errors (ECONNREFUSED).
  return code.startsWith('08') || /^57P0[123]$/.test(code) || /^E[A-Z]+$/.test(code);
}

/** The settings' name for the database, so every message says what to check. */
const setting = 'SPACE_DATABASE_URL';

function unavailable(err: unknown): SpaceError {
  return new SpaceError(ErrorCode.STORE_UNAVAILABLE, `the database (${setting}) is unreachable: ${(err as Error).message}`);
}

/** Statements kept numbered: the store's fixed ones, and the lengths its lists of ids take. */
const numberedKept = 2000;

/**
 * `?` placeholders numbered as PostgreSQL wants them (`$1`, `$2`, ...); the store's SQL has no `?`
 * anywhere else. Each text is numbered once: most statements are sent thousands of times a minute.
 */
class NumberedSql {
  private readonly known = new Map<string, string>();

  of(sql: string): string {
    let numbered = this.known.get(sql);
    if (numbered !== undefined) return numbered;
    let n = 0;
    numbered = sql.replace(/\?/g, () => `$${++n}`);
    if (this.known.size >= numberedKept) this.known.clear();
    this.known.set(sql, numbered);
    return numbered;
  }
}

function executor(numbered: NumberedSql, query: (sql: string, params: SqlValue[]) => Promise<pg.QueryResult>): SqlExecutor {
  const run = async (sql: string, params: SqlValue[] = []) => {
    try {
      return await query(numbered.of(sql), params);
    } catch (err) {
      throw isConnectionError(err) ? unavailable(err) : err;
    }
  };
  return {
    run: async (sql, params) => (await run(sql, params)).rowCount ?? 0,
    get: async <T>(sql: string, params?: SqlValue[]) => (await run(sql, params)).rows[0] as T | undefined,
    all: async <T>(sql: string, params?: SqlValue[]) => (await run(sql, params)).rows as T[],
  };
}

/** What `PostgresDatabase.open` takes besides the URL. */
export interface PostgresPoolOptions {
  /** The calls' pool (`SPACE_DATABASE_CONNECTIONS`). */
  maxConnections?: number;
  /** The background work's pool (`SPACE_DATABASE_BACKGROUND_CONNECTIONS`). */
  backgroundConnections?: number;
  connectTimeoutMs?: number;
}

function newPool(url: string, max: number, connectTimeoutMs: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: connectTimeoutMs, idleTimeoutMillis: 30_000, types });
  // An idle connection that the server closes emits here; without a listener it would end the process.
  pool.on('error', () => undefined);
  return pool;
}

function useOf(pool: pg.Pool): ConnectionUse {
  return { busy: pool.totalCount - pool.idleCount, idle: pool.idleCount, waiting: pool.waitingCount };
}

/**
 * PostgreSQL, shared by any number of control planes: two pools of connections, one for the API's
 * calls and one for background work (maintenance), so a burst of calls never holds up a pass nor a
 * pass the calls; a connection that drops (the server restarted) is replaced on the next call, and
 * calls made while the server is away fail with `STORE_UNAVAILABLE` (503) instead of hanging.
 */
export class PostgresDatabase implements SqlDatabase {
  readonly changesInWith = true;
  private readonly direct: SqlExecutor;
  private readonly numbered = new NumberedSql();
  /** Set inside `background`: the statements of that work take the background pool. */
  private readonly inBackground = new AsyncLocalStorage<true>();

  private constructor(
    private readonly callsPool: pg.Pool,
    private readonly backgroundPool: pg.Pool,
  ) {
    this.direct = executor(this.numbered, (sql, params) => this.pool().query(sql, params));
  }

  /** Connects, checks the server answers and brings the schema up to date; a clear error naming the setting if it cannot. */
  static async open(url: string, options: PostgresPoolOptions = {}): Promise<PostgresDatabase> {
    const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    const database = new PostgresDatabase(
      newPool(url, options.maxConnections ?? 10, connectTimeoutMs),
      newPool(url, options.backgroundConnections ?? 4, connectTimeoutMs),
    );
    try {
      await database.transaction(async (tx) => {
        await tx.get('SELECT pg_advisory_xact_lock(?)', [migrationLockKey]);
        await applyMigrations(tx, 'postgres');
      });
    } catch (err) {
      await database.close().catch(() => undefined);
      const cause = err instanceof SpaceError ? err.message : `the database (${setting}) could not be prepared: ${(err as Error).message}`;
      throw new Error(cause);
    }
    return database;
  }

  /** The pool the statement being made now takes. */
  private pool(): pg.Pool {
    return this.inBackground.getStore() ? this.backgroundPool : this.callsPool;
  }

  background<T>(work: () => Promise<T>): Promise<T> {
    return this.inBackground.run(true, work);
  }

  run(sql: string, params?: SqlValue[]): Promise<number> {
    return this.direct.run(sql, params);
  }

  get<T>(sql: string, params?: SqlValue[]): Promise<T | undefined> {
    return this.direct.get<T>(sql, params);
  }

  all<T>(sql: string, params?: SqlValue[]): Promise<T[]> {
    return this.direct.all<T>(sql, params);
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool().connect();
    } catch (err) {
      throw unavailable(err);
    }
    const tx = executor(this.numbered, (sql, params) => client.query(sql, params));
    let broken: unknown;
    // The pool listens for a connection's errors only while it is idle: one the server ends between
    // two statements of this transaction (a restart) would otherwise be an unhandled 'error' event
    // that ends the process. Its next statement fails instead, and the connection is destroyed.
    const lost = (err: Error): void => {
      broken = err;
    };
    client.on('error', lost);
    try {
      await tx.run('BEGIN');
      const result = await work(tx);
      await tx.run('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch((rollbackErr: unknown) => {
        broken = rollbackErr;
      });
      throw err;
    } finally {
      client.off('error', lost);
      // A connection lost or whose rollback failed is in an unknown state: destroy it rather than reuse it.
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  connections(): PoolUse {
    return { calls: useOf(this.callsPool), background: useOf(this.backgroundPool) };
  }

  async close(): Promise<void> {
    await Promise.all([this.callsPool.end(), this.backgroundPool.end()]);
  }
}
