import path from 'node:path';
import { type SettingValues, otlpTracesUrl } from '@space/server-kit';
import type { controlPlaneSettings } from '../settings.js';
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

/** What of a control plane's settings names its store. */
type StoreSettings = Pick<SettingValues<typeof controlPlaneSettings>, 'databaseUrl' | 'databaseConnections' | 'databaseBackgroundConnections'> &
  Parameters<typeof otlpTracesUrl>[0];

/** The store a control plane's settings name (`space up`, `space control-plane`): both pools sized, traced when traces are exported. */
export function openStoreFor(settings: StoreSettings, dataDir: string): Promise<Store> {
  return openStore({
    databaseUrl: settings.databaseUrl,
    dataDir,
    traced: otlpTracesUrl(settings) !== null,
    maxConnections: settings.databaseConnections,
    backgroundConnections: settings.databaseBackgroundConnections,
  });
}
