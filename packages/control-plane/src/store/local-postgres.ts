import { execFile, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from '@space/server-kit';

const run = promisify(execFile);

/** A PostgreSQL server on loopback for tests and `space cluster up`: Debian's binaries, a cluster of its own. */
export interface LocalPostgres {
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

/** The pid of the server that holds `data` (its `postmaster.pid`), while that process lives; else null. */
function runningServer(data: string): number | null {
  const pid = Number(existsSync(path.join(data, 'postmaster.pid')) ? readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0] : NaN);
  if (!Number.isInteger(pid) || pid <= 0) return null;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? pid : null;
  }
}

/**
 * Waits up to `ms` for a server still holding `data` to go (one stopping as its `cluster up` ends);
 * one that stays is another's, in use: refused with what to do instead of PostgreSQL's own words.
 */
async function waitForPreviousServer(data: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  let pid = runningServer(data);
  while (pid !== null && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    pid = runningServer(data);
  }
  if (pid !== null)
    throw new Error(
      `PostgreSQL in ${path.dirname(data)} still runs (pid ${pid}) after ${ms / 1000} s: another "space cluster up" uses this directory; stop that one first (Ctrl-C), or end the server with "kill ${pid}"`,
    );
}

/**
 * Starts a local PostgreSQL: `initdb` as the `postgres` user (it refuses root), trust
 * authentication on 127.0.0.1 only and a socket in its directory. In `dir` it keeps its data across
 * starts (and fsyncs); without, it lives in a temporary directory, fsync off (a test server), and is
 * removed by `stop()`. Stopped when the process exits in any case. A server of an earlier start
 * still stopping in `dir` is waited for (`previousServerWaitMs`, default 30 s).
 */
export async function startLocalPostgres(
  options: {
    dir?: string;
    port?: number;
    previousServerWaitMs?: number;
    /** TLS connections only (`hostssl`) with this certificate; its `url()`s then ask for `sslmode=verify-full` against `caFile`. */
    tls?: { caFile: string; certFile: string; keyFile: string };
    /** Server settings on top of these (`-c name=value`), e.g. `shared_preload_libraries` for a benchmark's statement counts. */
    settings?: Record<string, string>;
  } = {},
): Promise<LocalPostgres> {
  const bin = binDir();
  const temporary = !options.dir;
  const dir = options.dir ?? mkdtempSync(path.join(tmpdir(), 'space-pg-'));
  // The server runs as `postgres`: it must be able to enter every directory above its own.
  mkdirSync(path.dirname(dir), { recursive: true, mode: 0o755 });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const data = path.join(dir, 'data');
  const { uid, gid } = await run('id', ['-u', 'postgres']).then(async ({ stdout }) => ({
    uid: Number(stdout),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout),
  }));
  chownSync(dir, uid, gid);
  const asPostgres = (command: string, args: string[]) => run('runuser', ['-u', 'postgres', '--', path.join(bin, command), ...args], { cwd: dir });
  const port = options.port ?? (await freePort());
  const tlsOptions = options.tls ? ` -c ssl=on -c ssl_cert_file=${path.join(dir, 'server.crt')} -c ssl_key_file=${path.join(dir, 'server.key')}` : '';
  const extraSettings = Object.entries(options.settings ?? {})
    .map(([name, value]) => ` -c ${name}=${value}`)
    .join('');
  const ctl = (action: 'start' | 'stop', extra: string[] = []) =>
    asPostgres('pg_ctl', [
      '-D',
      data,
      '-w',
      '-l',
      path.join(dir, 'server.log'),
      ...(action === 'start'
        ? ['-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200${temporary ? ' -c fsync=off' : ''}${tlsOptions}${extraSettings}`]
        : []),
      ...extra,
      action,
    ]);
  const removeAll = () => {
    spawnSync('runuser', ['-u', 'postgres', '--', path.join(bin, 'pg_ctl'), '-D', data, '-m', temporary ? 'immediate' : 'fast', '-w', 'stop'], {
      stdio: 'ignore',
    });
    if (temporary) rmSync(dir, { recursive: true, force: true });
  };
  await waitForPreviousServer(data, options.previousServerWaitMs ?? 30_000);
  process.once('exit', removeAll);
  try {
    if (!existsSync(path.join(data, 'PG_VERSION')))
      await asPostgres('initdb', ['-D', data, '--auth=trust', '--username=postgres', '--no-locale', '--encoding=UTF8']);
    if (options.tls) {
      // The server reads its key only when the key is its own and no one else's.
      for (const [from, name] of [
        [options.tls.certFile, 'server.crt'],
        [options.tls.keyFile, 'server.key'],
      ] as const) {
        copyFileSync(from, path.join(dir, name));
        chownSync(path.join(dir, name), uid, gid);
        chmodSync(path.join(dir, name), 0o600);
      }
      writeFileSync(path.join(data, 'pg_hba.conf'), 'local all all trust\nhostssl all all 127.0.0.1/32 trust\n');
    }
    await ctl('start');
  } catch (err) {
    removeAll();
    throw err;
  }
  const tlsQuery = options.tls ? `?sslmode=verify-full&sslrootcert=${encodeURIComponent(options.tls.caFile)}` : '';
  const urlOf = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}${tlsQuery}`;
  const create = async (database: string) => {
    const admin = new pg.Client({ connectionString: urlOf('postgres') });
    await admin.connect();
    try {
      const name = database.replace(/"/g, '');
      const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${name}"`);
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
