import path from 'node:path';
import { PostgresDatabase, type PostgresPoolOptions } from './postgres-database.js';
import { SqlStore } from './sql-store.js';
import { SqliteDatabase } from './sqlite-database.js';
import type { Store } from './store.js';
import { tracedDatabase } from './traced-database.js';

/** The embedded store: `space.db` (or `file`, `:memory:` for tests) with its schema up to date. */
export async function openSqliteStore(file: string, traced = false): Promise<SqlStore> {
  const db = await SqliteDatabase.open(file);
  return new SqlStore(traced ? tracedDatabase(db) : db);
}

export async function openPostgresStore(url: string, traced = false, pools: PostgresPoolOptions = {}): Promise<SqlStore> {
  const db = await PostgresDatabase.open(url, pools);
  return new SqlStore(traced ? tracedDatabase(db) : db);
}

/**
 * The control plane's store: PostgreSQL when `databaseUrl` is set (`SPACE_DATABASE_URL`), shared by
 * every control plane, with at most `maxConnections` for calls (`SPACE_DATABASE_CONNECTIONS`) and
 * `backgroundConnections` for maintenance (`SPACE_DATABASE_BACKGROUND_CONNECTIONS`); otherwise SQLite
 * in the data directory, for one machine. `traced`: its statements are spans of the traced calls that run them.
 */
export async function openStore(options: { databaseUrl?: string; dataDir: string; traced?: boolean } & PostgresPoolOptions): Promise<Store> {
  if (options.databaseUrl) {
    if (!/^postgres(ql)?:\/\//.test(options.databaseUrl))
      throw new Error(`SPACE_DATABASE_URL must be a postgres:// or postgresql:// URL, not ${JSON.stringify(options.databaseUrl.split(':')[0])}`);
    return openPostgresStore(options.databaseUrl, options.traced, options);
  }
  return openSqliteStore(path.join(options.dataDir, 'space.db'), options.traced);
}
