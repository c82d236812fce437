import type { ChildProcess } from 'node:child_process';
import type { Writable } from 'node:stream';
import type { Command } from '@space/protocol';

/** `offset`: where the chunk starts in the process's output (stdout and stderr counted together). */
export type ProcessEvent =
  | { type: 'stdout' | 'stderr'; data: Buffer; offset: number }
  | { type: 'exit'; exitCode: number; signal: string | null; timedOut: boolean };

export type ProcessListener = (event: ProcessEvent) => void;

/** Whether a new listener first gets the kept output (and the exit), from offset `after` on. */
export interface ReplayOptions {
  replay: boolean;
  after?: number;
}

export interface ManagedProcessOptions {
  cmd: Command;
  child: ChildProcess;
  pty: boolean;
  backlogBytes: number;
  timeoutMs: number;
  /** Writes `R rows cols` resize requests to the PTY helper; only for PTY processes. */
  control?: Writable;
}

/**
 * A process started by the daemon: it keeps running when its client goes away, keeps the tail of
 * its output so a client can re-attach, and reports its exit once to every listener.
 */
export class ManagedProcess {
  readonly pid: number;
  readonly cmd: Command;
  readonly pty: boolean;
  readonly startedAt = new Date().toISOString();
  exit: { exitCode: number; signal: string | null; timedOut: boolean } | null = null;

  private readonly child: ChildProcess;
  private readonly control: Writable | undefined;
  private readonly listeners = new Set<ProcessListener>();
  private readonly backlog: ProcessEvent[] = [];
  private backlogSize = 0;
  /** Bytes of output so far: the offset of the next chunk. */
  private produced = 0;
  private readonly backlogBytes: number;
  private timedOut = false;
  private readonly timer: NodeJS.Timeout;

  constructor(options: ManagedProcessOptions) {
    this.child = options.child;
    this.pid = options.child.pid!;
    this.cmd = options.cmd;
    this.pty = options.pty;
    this.control = options.control;
    this.backlogBytes = options.backlogBytes;
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.kill('SIGKILL');
    }, options.timeoutMs);
    this.timer.unref();
  }

  /** Wires the child's pipes; called once right after construction. */
  start(): void {
    this.child.stdout?.on('data', (data: Buffer) => this.emitOutput('stdout', data));
    this.child.stderr?.on('data', (data: Buffer) => this.emitOutput('stderr', data));
    this.child.stdin?.on('error', () => undefined);
    this.control?.on('error', () => undefined);
    this.child.on('close', (code, signal) => {
      clearTimeout(this.timer);
      const exitCode = this.timedOut ? 124 : (code ?? 128 + signalNumber(signal));
      this.exit = { exitCode, signal: signal ?? null, timedOut: this.timedOut };
      this.emit({ type: 'exit', ...this.exit });
      this.listeners.clear();
    });
  }

  get running(): boolean {
    return this.exit === null;
  }

  /**
   * Subscribes to events; with `replay`, first delivers the kept output (and the exit, if any), from
   * offset `after` on: a client that reconnects gets exactly what it missed, if it is still kept.
   */
  subscribe(listener: ProcessListener, { replay, after = 0 }: ReplayOptions = { replay: false }): () => void {
    if (replay) {
      for (const event of this.backlog) {
        if (event.type === 'exit') listener(event);
        else if (event.offset + event.data.length > after) {
          const skip = Math.max(0, after - event.offset);
          listener(skip ? { ...event, data: event.data.subarray(skip), offset: event.offset + skip } : event);
        }
      }
    }
    if (this.exit) {
      if (replay && !this.backlog.some((e) => e.type === 'exit')) listener({ type: 'exit', ...this.exit });
      return () => undefined;
    }
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  write(data: Buffer): void {
    if (this.child.stdin && !this.child.stdin.destroyed) this.child.stdin.write(data);
  }

  endStdin(): void {
    this.child.stdin?.end();
  }

  resize(cols: number, rows: number): void {
    this.control?.write(`R ${rows} ${cols}\n`);
  }

  /** Signals the whole process group, so a shell's children go too. */
  kill(signal: NodeJS.Signals): void {
    if (!this.running) return;
    try {
      process.kill(-this.pid, signal);
    } catch {
      try {
        this.child.kill(signal);
      } catch {
        // Already gone: the close event reports it.
      }
    }
  }

  pausePipes(): void {
    this.child.stdout?.pause();
    this.child.stderr?.pause();
  }

  resumePipes(): void {
    this.child.stdout?.resume();
    this.child.stderr?.resume();
  }

  private emitOutput(type: 'stdout' | 'stderr', data: Buffer): void {
    const offset = this.produced;
    this.produced += data.length;
    this.emit({ type, data, offset });
  }

  private emit(event: ProcessEvent): void {
    this.keep(event);
    for (const listener of this.listeners) listener(event);
  }

  private keep(event: ProcessEvent): void {
    this.backlog.push(event);
    if (event.type !== 'exit') this.backlogSize += event.data.length;
    while (this.backlogSize > this.backlogBytes && this.backlog.length > 1) {
      const dropped = this.backlog.shift()!;
      if (dropped.type !== 'exit') this.backlogSize -= dropped.data.length;
    }
  }
}

const signalNumbers: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};

function signalNumber(signal: NodeJS.Signals | null): number {
  return signal ? (signalNumbers[signal] ?? 0) : 0;
}
