import type { Readable } from 'node:stream';
import type { SpaceError } from '@space/protocol';

/**
 * Collects a stream into one buffer, failing with `overflow()` past `limit` bytes. A client's
 * request is drained after an overflow (so it can still be answered with 413); a peer's reply is
 * destroyed at once (`drain: false`).
 */
export function readBounded(stream: Readable, limit: number, overflow: () => SpaceError, drain: boolean): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const fail = (err: unknown): void => {
      if (settled) return;
      settled = true;
      reject(err);
    };
    stream.on('data', (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      fail(overflow());
      if (!drain) stream.destroy();
    });
    stream.on('end', () => {
      if (settled) return;
      settled = true;
      resolve(Buffer.concat(chunks));
    });
    stream.on('error', fail);
    stream.on('close', () => fail(overflow()));
  });
}
