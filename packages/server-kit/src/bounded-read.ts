import type { Readable } from 'node:stream';
import type { SpaceError } from '@space/protocol';

export interface BoundedReadOptions {
  /** The error for more than `limit` bytes. */
  overflow: () => SpaceError;
  /** The error for a stream that broke off (reset, closed early) before its end. */
  interrupted: () => SpaceError;
  /** Drain the rest after an overflow, so a client's request can still be answered (413); a peer's reply is destroyed at once. */
  drain: boolean;
  /** Fails with `stalled()` when no byte arrives for this long (a body shorter than its content-length). */
  idle?: { ms: number; stalled: () => SpaceError };
}

/** Collects a stream into one buffer, bounded in size (and, with `idle`, in silence). */
export function readBounded(stream: Readable, limit: number, options: BoundedReadOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    let idleTimer: NodeJS.Timeout | null = null;
    const armIdle = (): void => {
      if (!options.idle) return;
      if (idleTimer) clearTimeout(idleTimer);
      idleTimer = setTimeout(() => {
        fail(options.idle!.stalled);
        stream.destroy();
      }, options.idle.ms);
    };
    // The error is made only when it is the outcome: a stream closes after every complete read too, and an error's stack costs.
    const fail = (error: () => SpaceError): void => {
      if (settled) return;
      settled = true;
      if (idleTimer) clearTimeout(idleTimer);
      reject(error());
    };
    armIdle();
    stream.on('data', (chunk: Buffer) => {
      if (settled) return;
      armIdle();
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      fail(options.overflow);
      if (!options.drain) stream.destroy();
    });
    stream.on('end', () => {
      if (settled) return;
      settled = true;
      if (idleTimer) clearTimeout(idleTimer);
      resolve(Buffer.concat(chunks));
    });
    stream.on('error', () => fail(options.interrupted));
    stream.on('close', () => fail(options.interrupted));
  });
}
