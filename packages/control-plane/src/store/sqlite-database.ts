import { chmodSync, existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { applyMigrations } from './migrations.js';
import type { SqlDatabase, SqlExecutor, SqlValue } from './sql-database.js';

/** Columns that files from before versioned migrations may lack, added before migration 1 is recorded. */
const columnsBeforeMigrations: [table: string, column: string, definition: string][] = [
  ['sessions', 'parent_checkpoint_id', 'TEXT'],
  ['sessions', 'checkpoint_interval_sec', 'INTEGER NOT NULL DEFAULT 60'],
  ['sessions', 'idle_timeout_sec', 'INTEGER NOT NULL DEFAULT 900'],
  ['sessions', 'full_checkpoint_interval_sec', 'INTEGER NOT NULL DEFAULT 600'],
  ['checkpoints', 'size_bytes', 'INTEGER'],
  ['checkpoints', 'pause_ms', 'INTEGER'],
  ['sandbox_history', 'restored_from', 'TEXT'],
  ['sessions', 'secrets', `TEXT NOT NULL DEFAULT '[]'`],
  ['sessions', 'egress', `TEXT NOT NULL DEFAULT '{"mode":"allow-all","domains":[],"cidrs":[]}'`],
  ['sandbox_history', 'note', 'TEXT'],
  ['sessions', 'on_resume', `TEXT NOT NULL DEFAULT 'processes'`],
  ['sessions', 'resume_note', 'TEXT'],
];

/**
 * Compiled statements kept, by their SQL text: the store's statements are a few dozen texts run over
 * and over (compiling one took longer than running it); texts that vary (lists of ids) push out the
 * least recently used.
 */
const statementsKept = 256;

/**
 * The embedded engine: one SQLite file in the data directory, WAL mode, shared safely by processes
 * on one machine. Statements run synchronously; a transaction holds every other call of this
 * process back until it ends, so nothing else lands inside it while its work awaits.
 */
export class SqliteDatabase implements SqlDatabase {
  readonly changesInWith = false;
  private readonly db: Database.Database;
  private inTransaction: Promise<void> | null = null;
  private readonly direct: SqlExecutor;
  private readonly statements = new Map<string, Database.Statement>();

  private constructor(file: string) {
    this.db = new Database(file);
    // The file holds secret values and key hashes: root only (the WAL files are made with the same mode).
    if (file !== ':memory:') for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) chmodSync(f, 0o600);
    this.db.pragma('journal_mode = WAL');
    // Several processes may share the file (control-plane replicas on one machine): wait for a writer instead of failing.
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('foreign_keys = ON');
    this.direct = {
      run: async (sql, params = []) => this.prepared(sql).run(...params).changes,
      get: async <T>(sql: string, params: SqlValue[] = []) => this.prepared(sql).get(...params) as T | undefined,
      all: async <T>(sql: string, params: SqlValue[] = []) => this.prepared(sql).all(...params) as T[],
    };
  }

  /** The statement compiled for `sql`, kept among the most recently used (a statement runs to its end before the next call, so one can serve every call). */
  private prepared(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (statement) this.statements.delete(sql);
    else {
      statement = this.db.prepare(sql);
      // A Map iterates in insertion order: the first entry is the least recently used.
      if (this.statements.size >= statementsKept) this.statements.delete(this.statements.keys().next().value!);
    }
    this.statements.set(sql, statement);
    return statement;
  }

  /** How many compiled statements are kept (at most `statementsKept`). */
  get statementsCached(): number {
    return this.statements.size;
  }

  /** Opens (or creates) the file and brings its schema up to date. */
  static async open(file: string): Promise<SqliteDatabase> {
    const database = new SqliteDatabase(file);
    await database.transaction(async (tx) => {
      database.addColumnsOfFilesBeforeMigrations();
      await applyMigrations(tx, 'sqlite');
    });
    return database;
  }

  private addColumnsOfFilesBeforeMigrations(): void {
    const hasTable = (name: string) => this.db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(name) !== undefined;
    if (hasTable('schema_migrations') || !hasTable('sessions')) return;
    for (const [table, column, definition] of columnsBeforeMigrations) {
      const columns = this.db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[];
      if (!columns.some((c) => c.name === column)) this.db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);
    }
  }

  async run(sql: string, params?: SqlValue[]): Promise<number> {
    while (this.inTransaction) await this.inTransaction;
    return this.direct.run(sql, params);
  }

  async get<T>(sql: string, params?: SqlValue[]): Promise<T | undefined> {
    while (this.inTransaction) await this.inTransaction;
    return this.direct.get<T>(sql, params);
  }

  async all<T>(sql: string, params?: SqlValue[]): Promise<T[]> {
    while (this.inTransaction) await this.inTransaction;
    return this.direct.all<T>(sql, params);
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    // Checked again after each wait, and acted on in the same turn: a helper awaited here would
    // leave a gap in which another transaction begins (two at once then met "within a transaction").
    while (this.inTransaction) await this.inTransaction;
    let end!: () => void;
    this.inTransaction = new Promise((resolve) => {
      end = resolve;
    });
    try {
      // IMMEDIATE takes the write lock now, so two processes cannot both read and then write.
      this.db.exec('BEGIN IMMEDIATE');
      try {
        const result = await work(this.direct);
        this.db.exec('COMMIT');
        return result;
      } catch (err) {
        this.db.exec('ROLLBACK');
        throw err;
      }
    } finally {
      this.inTransaction = null;
      end();
    }
  }

  background<T>(work: () => Promise<T>): Promise<T> {
    return work();
  }

  connections(): null {
    return null;
  }

  async close(): Promise<void> {
    while (this.inTransaction) await this.inTransaction;
    this.db.close();
  }
}
