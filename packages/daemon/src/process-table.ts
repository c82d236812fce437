import { spawn, type ChildProcess } from 'node:child_process';
import { type Stats, statSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { ErrorCode, Limits, SpaceError, type Command, type ProcessInfo } from '@space/protocol';
import { ManagedProcess } from './managed-process.js';
import type { SandboxPaths } from './sandbox-paths.js';
import { codeOfErrno, fsError } from './fs-errors.js';

export interface StartOptions {
  cmd: Command;
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  pty?: { cols: number; rows: number };
}

/** How many finished processes stay listed (and re-attachable) after they exit. */
const keepFinished = 64;

/** A working directory that is missing or not a directory is the caller's mistake, named as such. */
function checkWorkingDirectory(cwd: string): void {
  let info: Stats;
  try {
    info = statSync(cwd);
  } catch (err) {
    throw fsError(err, cwd);
  }
  if (!info.isDirectory()) throw new SpaceError(ErrorCode.NOT_A_DIRECTORY, `cwd ${JSON.stringify(cwd)} is not a directory`);
}

/** Every process the daemon started, by pid. */
export class ProcessTable {
  private readonly processes = new Map<number, ManagedProcess>();

  constructor(
    private readonly paths: SandboxPaths,
    private baseEnv: Record<string, string>,
    private readonly ptyHelper: string,
  ) {}

  /** The session's variables for processes started from now on (a restored sandbox serves a new session). */
  setSessionEnv(env: Record<string, string>): void {
    this.baseEnv = { ...this.baseEnv, ...env };
  }

  start(options: StartOptions): ManagedProcess {
    const argv = typeof options.cmd === 'string' ? ['/bin/sh', '-c', options.cmd] : options.cmd;
    const env = { ...this.baseEnv, ...options.env };
    const cwd = this.paths.resolve(options.cwd ?? '.');
    const timeoutMs = options.timeoutMs ?? Limits.defaultExecTimeoutMs;
    const file = options.pty ? this.ptyHelper : argv[0]!;
    const args = options.pty ? [String(options.pty.rows), String(options.pty.cols), '--', ...argv] : argv.slice(1);
    if (options.pty) env.TERM = env.TERM ?? 'xterm-256color';
    checkWorkingDirectory(cwd);
    let child: ChildProcess;
    try {
      child = spawn(file, args, { cwd, env, detached: true, stdio: options.pty ? ['pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe'] });
    } catch (err) {
      // Node throws at once for some errnos (ENOTDIR, E2BIG, ...) and for arguments it cannot pass (NUL bytes).
      const errno = (err as NodeJS.ErrnoException).code ?? '';
      throw new SpaceError(codeOfErrno(errno) ?? ErrorCode.EXEC_FAILED, `cannot start ${JSON.stringify(argv[0])}: ${(err as Error).message}`);
    }
    // A missing executable is reported through `pid === undefined` below; the async error event is expected.
    child.once('error', () => undefined);
    if (child.pid === undefined) {
      throw new SpaceError(ErrorCode.EXEC_FAILED, `cannot start ${JSON.stringify(argv[0])}: no such file or not executable`);
    }
    const control = options.pty ? (child.stdio[3] as Writable) : undefined;
    const managed = new ManagedProcess({ cmd: options.cmd, child, pty: Boolean(options.pty), backlogBytes: Limits.backgroundBacklogBytes, timeoutMs, control });
    managed.start();
    this.processes.set(managed.pid, managed);
    this.prune();
    return managed;
  }

  get(pid: number): ManagedProcess {
    const found = this.processes.get(pid);
    if (!found) throw new SpaceError(ErrorCode.PROCESS_NOT_FOUND, `no process with pid ${pid} was started by this sandbox's daemon`);
    return found;
  }

  list(): ProcessInfo[] {
    return [...this.processes.values()].map((p) => ({
      pid: p.pid,
      cmd: p.cmd,
      startedAt: p.startedAt,
      running: p.running,
      exitCode: p.exit?.exitCode ?? null,
      pty: p.pty,
    }));
  }

  /** Drops finished processes from the list: a sandbox handed to a new session shows none of its earlier ones. */
  forgetFinished(): void {
    this.prune(0);
  }

  killAll(): void {
    for (const p of this.processes.values()) p.kill('SIGKILL');
  }

  /** Drops the oldest finished processes beyond `keep`. */
  private prune(keep = keepFinished): void {
    const finished = [...this.processes.values()].filter((p) => !p.running);
    for (const p of finished.slice(0, Math.max(0, finished.length - keep))) this.processes.delete(p.pid);
  }
}
