import type { WebSocket } from 'ws';
import { SpaceApiError, SpaceClientError, isSpaceApiError } from './errors.js';
import type { ExecEvent } from './types.js';
import { EventQueue } from './event-queue.js';

/** Where a stream's process ran: a re-attach names it, so it never lands on another process with the pid. */
export interface ProcessBinding {
  sandbox?: string;
  instance?: string;
}

/** Opens a new socket re-attached to process `pid`, replaying its output from offset `after`. */
export type Reattach = (pid: number, after: number, binding: ProcessBinding) => WebSocket;

/** Reconnect attempts after a dropped stream, with their pauses (doubling from 200 ms, at most 5 s). */
const maxReconnects = 8;

interface StreamMessage {
  type?: string;
  data?: string;
  offset?: number;
  pid?: number;
  instance?: string;
  produced?: number;
  sandboxId?: string;
  exitCode?: number;
  signal?: string | null;
  timedOut?: boolean;
  code?: string;
  message?: string;
}

/**
 * A running command's events as an async iterator, ending after `exit`. Also takes stdin and
 * signals while the command runs. When the connection drops before the exit, the stream re-attaches
 * to the process by pid and asks for the output after the last byte it received, so no output is
 * repeated or lost (as long as the daemon still keeps it; stdin written as the connection dropped
 * may be lost). It gives up after a few attempts or when the process is gone. A re-attach names
 * the sandbox and process instance it had: when the sandbox died, the stream ends with SANDBOX_DIED,
 * unless the session resumed from a full checkpoint that held the process (a `restored` event, and
 * the process goes on from there).
 */
export class ExecStream implements AsyncIterable<ExecEvent> {
  private readonly events = new EventQueue<ExecEvent>();
  private ws!: WebSocket;
  private pid: number | null = null;
  private binding: ProcessBinding = {};
  /** Output bytes received so far: where a re-attached stream continues. */
  private received = 0;
  private exited = false;
  private closedByUser = false;
  private attempts = 0;
  private lastError: Error | null = null;
  private readonly outbox: string[] = [];
  /** Times the stream re-attached after a dropped connection. */
  reconnects = 0;

  constructor(
    ws: WebSocket,
    start: Record<string, unknown> | null,
    private readonly reattach: Reattach | null = null,
  ) {
    this.bind(ws, start);
  }

  write(data: string | Buffer): void {
    this.send({ type: 'stdin', data: Buffer.from(data).toString('base64') });
  }

  /** Bytes written (stdin) and not yet sent: pause writing while this is large. */
  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  end(): void {
    this.send({ type: 'stdin-eof' });
  }

  kill(signal: string = 'SIGTERM'): void {
    this.send({ type: 'signal', signal });
  }

  resize(cols: number, rows: number): void {
    this.send({ type: 'resize', cols, rows });
  }

  /** Closes the stream (the process keeps running; re-attach by pid). */
  close(): void {
    this.closedByUser = true;
    this.ws.close();
  }

  [Symbol.asyncIterator](): AsyncIterator<ExecEvent> {
    return this.events[Symbol.asyncIterator]();
  }

  private bind(ws: WebSocket, start: Record<string, unknown> | null): void {
    this.ws = ws;
    ws.on('open', () => {
      if (start) ws.send(JSON.stringify(start));
      for (const text of this.outbox.splice(0)) ws.send(text);
    });
    ws.on('message', (raw) => this.onMessage(raw.toString()));
    // An API error (a refused handshake) is final and stays the reason, whatever the socket says after it.
    ws.on('error', (err) => {
      if (!isSpaceApiError(this.lastError)) this.lastError = isSpaceApiError(err) ? err : new SpaceClientError('NETWORK', err.message);
    });
    ws.on('close', () => this.onClose());
  }

  private onClose(): void {
    if (this.exited || this.closedByUser) return this.finish(null);
    if (isSpaceApiError(this.lastError)) return this.finish(this.lastError);
    if (this.reattach && this.pid !== null && this.attempts < maxReconnects) {
      const pause = Math.min(5000, 200 * 2 ** this.attempts);
      this.attempts++;
      const pid = this.pid;
      setTimeout(() => {
        if (this.closedByUser) return this.finish(null);
        this.reconnects++;
        this.bind(this.reattach!(pid, this.received, this.binding), null);
      }, pause);
      return;
    }
    this.finish(
      this.lastError ??
        new SpaceClientError('NETWORK', `the stream closed before the command exited${this.pid !== null ? `; re-attach to pid ${this.pid}` : ''}`),
    );
  }

  private send(message: unknown): void {
    const text = JSON.stringify(message);
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(text);
    else this.outbox.push(text);
  }

  private onMessage(text: string): void {
    let m: StreamMessage;
    try {
      m = JSON.parse(text);
    } catch {
      return this.finish(new SpaceClientError('PROTOCOL', 'the server sent a message that is not JSON'));
    }
    this.attempts = 0;
    if (m.type === 'error') {
      this.closedByUser = true; // an error from the server is final: no reconnect
      return this.finish(new SpaceApiError(m.code ?? 'INTERNAL', 0, m.message ?? 'stream error'));
    }
    if (m.type === 'started') {
      // A re-attached stream announces the process again: one `started` per stream.
      if (this.pid === null) this.events.push({ type: 'started', pid: m.pid! });
      else if (m.sandboxId && this.binding.sandbox && m.sandboxId !== this.binding.sandbox) this.restoredOn(m.sandboxId, m.produced);
      this.pid = m.pid!;
      this.binding = { sandbox: m.sandboxId ?? this.binding.sandbox, instance: m.instance ?? this.binding.instance };
    } else if (m.type === 'stdout' || m.type === 'stderr') {
      let data = Buffer.from(m.data ?? '', 'base64');
      if (m.offset !== undefined) {
        const end = m.offset + data.length;
        if (end <= this.received) return; // replayed, already delivered
        if (m.offset < this.received) data = data.subarray(this.received - m.offset);
        this.received = end;
      } else this.received += data.length;
      this.events.push({ type: m.type, data });
    } else if (m.type === 'exit') {
      this.exited = true;
      this.events.push({ type: 'exit', exitCode: m.exitCode!, signal: m.signal ?? null, timedOut: m.timedOut });
    }
  }

  /** The process runs on in `sandboxId`, from a checkpoint: what it printed since is printed again. */
  private restoredOn(sandboxId: string, produced: number | undefined): void {
    const repeatedBytes = produced !== undefined && produced < this.received ? this.received - produced : 0;
    this.received -= repeatedBytes;
    this.events.push({ type: 'restored', sandboxId, previousSandboxId: this.binding.sandbox!, repeatedBytes });
  }

  private finish(error: Error | null): void {
    this.events.finish(this.exited ? null : error);
  }
}
