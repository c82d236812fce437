import type { WebSocket } from 'ws';
import { SpaceApiError, SpaceClientError, isSpaceApiError } from './errors.js';
import { EventQueue } from './event-queue.js';

/** A change under a watched path: `rename` (created, deleted or moved) or `change` (written). */
export interface FileChange {
  event: 'rename' | 'change';
  path: string;
}

/**
 * Changes under a path in the sandbox, as an async iterator, until `close()`. `ready` resolves
 * once the watch is in place (changes made before it are not reported).
 */
export class FileWatch implements AsyncIterable<FileChange> {
  private readonly changes = new EventQueue<FileChange>();
  readonly ready: Promise<void>;

  constructor(private readonly ws: WebSocket) {
    let onReady: () => void = () => undefined;
    let onFail: (err: Error) => void = () => undefined;
    this.ready = new Promise((resolve, reject) => ((onReady = resolve), (onFail = reject)));
    this.ready.catch(() => undefined);
    const fail = (err: Error): void => {
      onFail(err);
      this.changes.finish(err);
    };
    ws.on('message', (raw) => {
      let m: { type?: string; event?: 'rename' | 'change'; path?: string; code?: string; message?: string };
      try {
        m = JSON.parse(raw.toString());
      } catch {
        return fail(new SpaceClientError('PROTOCOL', 'the server sent a message that is not JSON'));
      }
      if (m.type === 'ready') onReady();
      else if (m.type === 'change' && m.event && typeof m.path === 'string') this.changes.push({ event: m.event, path: m.path });
      else if (m.type === 'error') fail(new SpaceApiError(m.code ?? 'INTERNAL', 0, m.message ?? 'watch error'));
    });
    // A refused handshake arrives as the API's error (FORBIDDEN, VALIDATION_FAILED...): kept as it is.
    ws.on('error', (err) => fail(isSpaceApiError(err) ? err : new SpaceClientError('NETWORK', err.message)));
    ws.on('close', () => {
      onFail(new SpaceClientError('NETWORK', 'the watch closed before it was ready'));
      this.changes.finish(null);
    });
  }

  close(): void {
    this.ws.close();
  }

  [Symbol.asyncIterator](): AsyncIterator<FileChange> {
    return this.changes[Symbol.asyncIterator]();
  }
}
