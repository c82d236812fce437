import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { type CommandResult, type CommandRunner, CommandTimeout, type RunOptions, settled, spawnedCommands } from './run-command.js';

type SpawnerProcess = ChildProcessByStdio<Writable, Readable, null>;

/** What the spawner is told to run (native/space-spawner/main.go). */
interface SpawnRequest {
  id: number;
  argv: string[];
  input?: string;
  cwd?: string;
  env?: string[];
  discardOutput?: boolean;
  detach?: { outputFile: string };
  /** Killed if not ended by then (a detached one: with its session). */
  timeoutMs?: number;
}

interface SpawnReply {
  id: number;
  code: number;
  stdout: string;
  stderr: string;
  error?: string;
  /** Killed at its deadline. */
  timedOut?: boolean;
}

interface Pending {
  argv: string[];
  allowFailure: boolean | undefined;
  timeoutMs: number | undefined;
  resolve: (result: CommandResult) => void;
  reject: (err: Error) => void;
}

/** The options the spawner takes; a command given any other (progress lines, its own stdio) is spawned here. */
const forwardedOptions = new Set(['allowFailure', 'input', 'cwd', 'env', 'stdio', 'timeout']);

/**
 * The node's host commands (ip, iptables-restore, btrfs, runsc and its subreaper), run by a small
 * helper process (native/space-spawner). Node.js forks this whole process for every child: with a
 * few hundred MB resident that blocked the event loop a median 14 ms per command here (66 ms at P99;
 * 3,900 commands in two bursts of 100 creates), and the control plane, the node API and every other
 * sandbox's calls waited behind it. The helper starts each command without copying anything
 * (~0.3 ms), off the event loop.
 *
 * Started on the first command, in a session of its own (a terminal's Ctrl-C reaches only the
 * agent, which still needs it to stop sandboxes); it ends when its stdin does: at `stop()`, or with
 * this process however it ends. A helper that died fails the commands it was running and is started
 * again for the next.
 */
export class Spawner implements CommandRunner {
  private child: SpawnerProcess | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private stopped = false;

  constructor(readonly binary: string) {}

  run(argv: string[], options: RunOptions = {}): Promise<CommandResult> {
    const request = this.stopped ? null : requestOf(argv, options);
    if (!request) return spawnedCommands.run(argv, options);
    return this.send(request, options.allowFailure);
  }

  async startDetached(argv: string[], outputFile: string, timeoutMs?: number): Promise<string> {
    if (this.stopped) return spawnedCommands.startDetached(argv, outputFile, timeoutMs);
    return (await this.send({ argv, detach: { outputFile }, ...(timeoutMs ? { timeoutMs } : {}) }, false)).stdout;
  }

  /** Ends the helper once its commands have ended; later commands are spawned by this process. */
  async stop(): Promise<void> {
    this.stopped = true;
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    setReferenced(child, true);
    child.stdin.end();
    await exited;
  }

  /** The helper's pid, while it runs. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  private send(request: Omit<SpawnRequest, 'id'>, allowFailure: boolean | undefined): Promise<CommandResult> {
    const child = this.child ?? this.startChild();
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      if (this.pending.size === 0) setReferenced(child, true);
      this.pending.set(id, { argv: request.argv, allowFailure, timeoutMs: request.timeoutMs, resolve, reject });
      child.stdin.write(`${JSON.stringify({ ...request, id })}\n`);
    });
  }

  private startChild(): SpawnerProcess {
    const child = spawn(this.binary, [], { stdio: ['pipe', 'pipe', 'inherit'], detached: true });
    this.child = child;
    setReferenced(child, false);
    // A write after the helper died fails here; its 'close' fails what was pending.
    child.stdin.on('error', () => undefined);
    createInterface({ input: child.stdout }).on('line', (line) => this.answer(child, line));
    const gone = (why: string) => {
      if (this.child !== child) return;
      this.child = null;
      for (const [id, p] of this.pending) {
        this.pending.delete(id);
        p.reject(new Error(`cannot run ${p.argv[0]}: the spawner ${why}`));
      }
    };
    child.once('error', (err) => gone(`could not run (${this.binary}: ${err.message})`));
    child.once('close', (code, signal) => gone(`exited (${signal ?? code})`));
    return child;
  }

  private answer(child: SpawnerProcess, line: string): void {
    let reply: SpawnReply;
    try {
      reply = JSON.parse(line) as SpawnReply;
    } catch {
      // Not its protocol: a helper of another build. Ended, it fails what it runs and a new one starts.
      child.kill();
      return;
    }
    const p = this.pending.get(reply.id);
    if (!p) return;
    this.pending.delete(reply.id);
    // Stopping, it keeps this process alive until it has exited.
    if (this.pending.size === 0 && this.child && !this.stopped) setReferenced(this.child, false);
    if (reply.error) return p.reject(new Error(reply.error));
    if (reply.timedOut) return p.reject(new CommandTimeout(p.argv, p.timeoutMs ?? 0));
    try {
      p.resolve(settled(p.argv, { code: reply.code, stdout: reply.stdout, stderr: reply.stderr }, p.allowFailure));
    } catch (err) {
      p.reject(err as Error);
    }
  }
}

/** The request for a command, or null when its options need a child of this process (spawn's own). */
function requestOf(argv: string[], options: RunOptions): Omit<SpawnRequest, 'id'> | null {
  if (Object.keys(options).some((key) => !forwardedOptions.has(key))) return null;
  const { input, cwd, env, stdio, timeout } = options;
  const discardOutput = stdio === 'ignore' || (Array.isArray(stdio) && stdio.every((s) => s === 'ignore'));
  if (stdio !== undefined && !discardOutput) return null;
  if (cwd !== undefined && typeof cwd !== 'string') return null;
  return {
    argv,
    ...(input === undefined ? {} : { input }),
    ...(cwd === undefined ? {} : { cwd }),
    ...(env === undefined ? {} : { env: Object.entries(env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`])) }),
    ...(discardOutput ? { discardOutput } : {}),
    ...(timeout ? { timeoutMs: timeout } : {}),
  };
}

/** The helper keeps this process alive only while it runs commands for it. */
function setReferenced(child: SpawnerProcess, referenced: boolean): void {
  for (const handle of [child, child.stdout, child.stdin] as { ref(): void; unref(): void }[]) {
    if (referenced) handle.ref();
    else handle.unref();
  }
}
