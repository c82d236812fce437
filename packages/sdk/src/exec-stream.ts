import type { WebSocket } from 'ws';
import { SpaceApiError, SpaceClientError } from './errors.js';
import type { ExecEvent } from './types.js';

/**
 * A running command's events as an async iterator, ending after `exit`. Also takes stdin and
 * signals while the command runs.
 */
export class ExecStream implements AsyncIterable<ExecEvent> {
  private readonly queue: ExecEvent[] = [];
  private waiting: { resolve: (value: IteratorResult<ExecEvent>) => void; reject: (err: Error) => void } | null = null;
  private failure: Error | null = null;
  /** The exit event arrived. */
  private exited = false;
  /** The socket is finished (closed, failed or exited). */
  private finished = false;

  constructor(private readonly ws: WebSocket, start: Record<string, unknown> | null) {
    ws.on('open', () => {
      if (start) ws.send(JSON.stringify(start));
    });
    ws.on('message', (raw) => this.onMessage(raw.toString()));
    ws.on('error', (err) => this.finish(new SpaceClientError('NETWORK', err.message)));
    ws.on('close', () => this.finish(this.exited ? null : new SpaceClientError('NETWORK', 'the stream closed before the command exited; re-attach by pid')));
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

  close(): void {
    this.ws.close();
  }

  [Symbol.asyncIterator](): AsyncIterator<ExecEvent> {
    return {
      next: () => {
        const event = this.queue.shift();
        if (event) return Promise.resolve({ value: event, done: false });
        if (this.failure) return Promise.reject(this.failure);
        if (this.finished) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.waiting = { resolve, reject };
        });
      },
    };
  }

  private send(message: unknown): void {
    const text = JSON.stringify(message);
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(text);
    else this.ws.once('open', () => this.ws.send(text));
  }

  private onMessage(text: string): void {
    let m: { type?: string; data?: string; pid?: number; exitCode?: number; signal?: string | null; timedOut?: boolean; code?: string; message?: string };
    try {
      m = JSON.parse(text);
    } catch {
      return this.finish(new SpaceClientError('PROTOCOL', 'the server sent a message that is not JSON'));
    }
    if (m.type === 'error') return this.finish(new SpaceApiError(m.code ?? 'INTERNAL', 0, m.message ?? 'stream error'));
    let event: ExecEvent | null = null;
    if (m.type === 'started') event = { type: 'started', pid: m.pid! };
    else if (m.type === 'stdout' || m.type === 'stderr') event = { type: m.type, data: Buffer.from(m.data ?? '', 'base64') };
    else if (m.type === 'exit') {
      event = { type: 'exit', exitCode: m.exitCode!, signal: m.signal ?? null, timedOut: m.timedOut };
      this.exited = true;
    }
    if (event) this.push(event);
  }

  private push(event: ExecEvent): void {
    const waiting = this.waiting;
    this.waiting = null;
    if (waiting) waiting.resolve({ value: event, done: false });
    else this.queue.push(event);
  }

  private finish(error: Error | null): void {
    if (this.finished) return;
    this.finished = true;
    if (error && !this.exited) this.failure = error;
    const waiting = this.waiting;
    this.waiting = null;
    if (!waiting) return;
    if (this.failure) waiting.reject(this.failure);
    else waiting.resolve({ value: undefined, done: true });
  }
}
