import { execFile, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const run = promisify(execFile);

/** A PostgreSQL server of its own for a test: Debian's binaries, a fresh cluster in a temporary directory, loopback only. */
export interface PrivatePostgres {
  /** A database of its own on the server (created on first use of the name). */
  url(database?: string): Promise<string>;
  /** Stops the server at once (as a crash would) and starts it again on the same port and data. */
  restart(downMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** The newest PostgreSQL installed from Debian's packages (`postgresql-15` on Debian 12). */
function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(path.join(root, v, 'bin', 'pg_ctl')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (!versions[0]) throw new Error('PostgreSQL is not installed (Debian package postgresql-15; ./space setup installs it)');
  return path.join(root, versions[0], 'bin');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts a private PostgreSQL: `initdb` as the `postgres` user (it refuses root) in a temporary
 * directory, trust authentication on 127.0.0.1 and a socket in that directory, fsync off (a test
 * server). Stopped and removed by `stop()`, or when the process exits.
 */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = binDir();
  const dir = mkdtempSync(path.join(tmpdir(), 'space-pg-'));
  const data = path.join(dir, 'data');
  const { uid, gid } = await run('id', ['-u', 'postgres']).then(async ({ stdout }) => ({
    uid: Number(stdout),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout),
  }));
  chownSync(dir, uid, gid);
  const asPostgres = (command: string, args: string[]) => run('runuser', ['-u', 'postgres', '--', path.join(bin, command), ...args], { cwd: dir });
  const port = await freePort();
  const ctl = (action: 'start' | 'stop', extra: string[] = []) =>
    asPostgres('pg_ctl', [
      '-D',
      data,
      '-w',
      '-l',
      path.join(dir, 'server.log'),
      ...(action === 'start' ? ['-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`] : []),
      ...extra,
      action,
    ]);
  const removeAll = () => {
    spawnSync('runuser', ['-u', 'postgres', '--', path.join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', removeAll);
  try {
    await asPostgres('initdb', ['-D', data, '--auth=trust', '--username=postgres', '--no-locale', '--encoding=UTF8']);
    await ctl('start');
  } catch (err) {
    removeAll();
    throw err;
  }
  const urlOf = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const create = async (database: string) => {
    const admin = new pg.Client({ connectionString: urlOf('postgres') });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE "${database.replace(/"/g, '')}"`);
    } finally {
      await admin.end();
    }
    return urlOf(database);
  };
  const made = new Map<string, Promise<string>>();
  return {
    url(database = 'space') {
      if (!made.has(database)) made.set(database, create(database));
      return made.get(database)!;
    },
    async restart(downMs = 0) {
      await ctl('stop', ['-m', 'immediate']);
      await new Promise((resolve) => setTimeout(resolve, downMs));
      await ctl('start');
    },
    async stop() {
      process.removeListener('exit', removeAll);
      removeAll();
    },
  };
}
