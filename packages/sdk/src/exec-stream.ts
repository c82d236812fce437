import type { WebSocket } from 'ws';
import { SpaceApiError, SpaceClientError } from './errors.js';
import type { ExecEvent } from './types.js';
import { EventQueue } from './event-queue.js';

/**
 * A running command's events as an async iterator, ending after `exit`. Also takes stdin and
 * signals while the command runs.
 */
export class ExecStream implements AsyncIterable<ExecEvent> {
  private readonly events = new EventQueue<ExecEvent>();
  /** The exit event arrived. */
  private exited = false;

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
    return this.events[Symbol.asyncIterator]();
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
    if (event) this.events.push(event);
  }

  private finish(error: Error | null): void {
    this.events.finish(this.exited ? null : error);
  }
}
