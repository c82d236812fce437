import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import { openPostgresStore, openSqliteStore } from '../store/open-store.js';
import type { SqlStore } from '../store/sql-store.js';
import { type LocalPostgres, startLocalPostgres } from '../store/local-postgres.js';

export interface StoreEngine {
  name: 'sqlite' | 'postgres';
  /** A store on database `name` (made on first use); the same name again is a second connection to it, as another control plane has. */
  open(name: string): Promise<SqlStore>;
  /** Where database `name` is: its file or URL. */
  location(name: string): Promise<string>;
}

/**
 * Both engines of the store for a test file: SQLite files in a temporary directory, and a private
 * PostgreSQL server started on first use. Every store opened is closed, and the server stopped,
 * after the file's tests.
 */
export function storeEngines(): { sqlite: StoreEngine; postgres: StoreEngine & { server(): Promise<LocalPostgres> }; all: StoreEngine[] } {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-store-'));
  const opened: SqlStore[] = [];
  let server: Promise<LocalPostgres> | null = null;
  const postgresServer = () => {
    server ??= startLocalPostgres();
    return server;
  };
  const track = (store: SqlStore) => {
    opened.push(store);
    return store;
  };
  after(async () => {
    await Promise.all(opened.map((s) => s.close().catch(() => undefined)));
    if (server) await (await server).stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const sqlite: StoreEngine = {
    name: 'sqlite',
    location: async (name) => path.join(dir, `${name}.db`),
    open: async (name) => track(await openSqliteStore(path.join(dir, `${name}.db`))),
  };
  const postgres = {
    name: 'postgres' as const,
    server: postgresServer,
    location: async (name: string) => (await postgresServer()).url(name.toLowerCase()),
    open: async (name: string) => track(await openPostgresStore(await (await postgresServer()).url(name.toLowerCase()))),
  };
  return { sqlite, postgres, all: [sqlite, postgres] };
}
