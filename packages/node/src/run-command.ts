import { spawn, type SpawnOptions } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import type { Readable } from 'node:stream';

export interface CommandResult {
  stdout: string;
  stderr: string;
  code: number;
}

export class CommandError extends Error {
  constructor(
    readonly argv: string[],
    readonly result: CommandResult,
  ) {
    super(`${argv.join(' ')} exited ${result.code}: ${(result.stderr || result.stdout).trim().slice(-2000)}`);
    this.name = 'CommandError';
  }
}

/**
 * A command killed at its deadline (`RunOptions.timeout`): it had not ended. Thrown whether or not
 * failure is allowed: a caller must not take a command that never answered for one that failed.
 */
export class CommandTimeout extends Error {
  constructor(
    readonly argv: string[],
    readonly timeoutMs: number,
  ) {
    super(`${argv.join(' ')} did not end within ${timeoutMs / 1000} s and was killed`);
    this.name = 'CommandTimeout';
  }
}

export interface RunOptions extends SpawnOptions {
  /** Resolve with the result instead of throwing on a non-zero exit. */
  allowFailure?: boolean;
  input?: string;
  /** Called with each line of stderr and stdout, for progress. */
  onLine?: (line: string) => void;
  /**
   * Once aborted, the command and every process it started (its own process group: a chroot's
   * dpkg, debootstrap's children) are killed, and the run rejects: for long builds a stopping node
   * must not wait for, nor leave running on its storage.
   */
  abort?: AbortSignal;
}

/** Runs the node's host commands: a child spawned by this process, or by the node's spawner (spawner.ts). */
export interface CommandRunner {
  run(argv: string[], options?: RunOptions): Promise<CommandResult>;
  /**
   * Starts a command that stays (runsc's subreaper): in a session of its own, its stdout and stderr
   * appended to `outputFile`, a pipe on its fd 3. Resolves with what it wrote on fd 3 once it closed
   * it; with `timeoutMs`, its whole session is killed if it has not by then (CommandTimeout).
   */
  startDetached(argv: string[], outputFile: string, timeoutMs?: number): Promise<string>;
}

/** Commands spawned by this process (Node.js forks it for each): for tools, tests and the rare command. */
export const spawnedCommands: CommandRunner = { run: runCommand, startDetached };

/** A command's result, or its CommandError for a non-zero exit unless failure is allowed. */
export function settled(argv: string[], result: CommandResult, allowFailure: boolean | undefined): CommandResult {
  if (result.code !== 0 && !allowFailure) throw new CommandError(argv, result);
  return result;
}

function startDetached(argv: string[], outputFile: string, timeoutMs?: number): Promise<string> {
  const output = openSync(outputFile, 'a');
  let timer: NodeJS.Timeout | undefined;
  return new Promise<string>((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', output, output, 'pipe'] });
    const status = child.stdio[3] as Readable;
    let text = '';
    let killed = false;
    if (timeoutMs && child.pid)
      timer = setTimeout(() => {
        killed = true;
        process.kill(-child.pid!, 'SIGKILL');
      }, timeoutMs);
    child.once('error', (err) => reject(new Error(`cannot run ${argv[0]}: ${err.message}`)));
    status.on('data', (chunk: Buffer) => (text += chunk.toString()));
    status.once('close', () => {
      child.unref();
      if (killed) reject(new CommandTimeout(argv, timeoutMs!));
      else resolve(text);
    });
  }).finally(() => {
    clearTimeout(timer);
    closeSync(output);
  });
}

/** Runs a host command from an argv array (never a shell string) and collects its output. */
export function runCommand(argv: string[], options: RunOptions = {}): Promise<CommandResult> {
  const { allowFailure, input, onLine, abort, ...spawnOptions } = options;
  if (abort?.aborted) return Promise.reject(new Error(`${argv[0]} not run: ${abortReason(abort)}`));
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(spawnOptions.timeout ? { killSignal: 'SIGKILL' } : {}),
      ...(abort ? { detached: true } : {}),
      ...spawnOptions,
    });
    const killGroup = (): void => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
    };
    abort?.addEventListener('abort', killGroup, { once: true });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const keep = (sink: Buffer[]) => (chunk: Buffer) => {
      sink.push(chunk);
      if (onLine) for (const line of chunk.toString().split('\n')) if (line.trim()) onLine(line.trim());
    };
    child.stdout?.on('data', keep(out));
    child.stderr?.on('data', keep(err));
    child.on('error', (e) => reject(new Error(`cannot run ${argv[0]}: ${e.message}`)));
    child.on('close', (code, signal) => {
      abort?.removeEventListener('abort', killGroup);
      if (abort?.aborted) return reject(new Error(`${argv[0]} killed: ${abortReason(abort)}`));
      if (spawnOptions.timeout && signal === 'SIGKILL' && child.killed) return reject(new CommandTimeout(argv, spawnOptions.timeout));
      const result = { stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString(), code: code ?? 128 + (signal ? 9 : 0) };
      try {
        resolve(settled(argv, result, allowFailure));
      } catch (e) {
        reject(e);
      }
    });
    if (input !== undefined) child.stdin?.end(input);
    else child.stdin?.end();
  });
}

function abortReason(signal: AbortSignal): string {
  return signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? 'aborted');
}
