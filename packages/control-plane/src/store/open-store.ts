import path from 'node:path';
import { PostgresDatabase } from './postgres-database.js';
import { SqlStore } from './sql-store.js';
import { SqliteDatabase } from './sqlite-database.js';
import type { Store } from './store.js';

/** The embedded store: `space.db` (or `file`, `:memory:` for tests) with its schema up to date. */
export async function openSqliteStore(file: string): Promise<SqlStore> {
  return new SqlStore(await SqliteDatabase.open(file));
}

export async function openPostgresStore(url: string): Promise<SqlStore> {
  return new SqlStore(await PostgresDatabase.open(url));
}

/**
 * The control plane's store: PostgreSQL when `databaseUrl` is set (`SPACE_DATABASE_URL`), shared by
 * every control plane; otherwise SQLite in the data directory, for one machine.
 */
export async function openStore(options: { databaseUrl?: string; dataDir: string }): Promise<Store> {
  if (options.databaseUrl) {
    if (!/^postgres(ql)?:\/\//.test(options.databaseUrl))
      throw new Error(`SPACE_DATABASE_URL must be a postgres:// or postgresql:// URL, not ${JSON.stringify(options.databaseUrl.split(':')[0])}`);
    return openPostgresStore(options.databaseUrl);
  }
  return openSqliteStore(path.join(options.dataDir, 'space.db'));
}
