import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { PassThrough, Transform, type TransformCallback } from 'node:stream';
import { type DataKey, ErrorCode, SpaceError, type StoredObject } from '@space/protocol';

/*
 * Checkpoint objects sealed at rest: AES-256-GCM under the tenant's data key, in chunks, so that an
 * object of any size streams through bounded memory and no byte reaches a reader before its chunk's
 * tag is checked. The layout (version 1):
 *
 *   header  = "SPCE" | 0x01 | nonce prefix (8 random bytes)
 *   chunk i = length (uint32 BE; its top bit set on the last chunk) | ciphertext | tag (16 bytes)
 *
 * Chunk i's nonce is the prefix followed by i (uint32 BE); its additional data is the header, the
 * object's key, i and whether it is the last. So chunks cannot be reordered, dropped, cut off at the
 * end or moved into another object without the check failing, and an empty object still has one
 * (last, empty) chunk.
 */
const magic = Buffer.from('SPCE');
const version = 1;
const headerBytes = magic.length + 1 + 8;
const lengthBytes = 4;
const tagBytes = 16;
const lastFlag = 0x8000_0000;
/** The plaintext bytes of a chunk, at most: also the most a reader buffers of a hostile object. */
export const sealedChunkBytes = 256 * 1024;

function keyBytes(dataKey: DataKey): Buffer {
  return Buffer.from(dataKey.key, 'base64');
}

function nonce(prefix: Buffer, index: number): Buffer {
  const n = Buffer.alloc(12);
  prefix.copy(n, 0);
  n.writeUInt32BE(index, 8);
  return n;
}

function additionalData(header: Buffer, objectKey: string, index: number, last: boolean): Buffer {
  const tail = Buffer.alloc(5);
  tail.writeUInt32BE(index, 0);
  tail[4] = last ? 1 : 0;
  return Buffer.concat([header, Buffer.from(objectKey, 'utf8'), tail]);
}

/** Bytes received and not consumed yet, taken from the front: a copy only of what spans chunks. */
class ByteQueue {
  private readonly chunks: Buffer[] = [];
  length = 0;

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  /** The first `n` bytes (n <= length), removed. */
  take(n: number): Buffer {
    const out = this.peek(n);
    this.length -= n;
    for (let left = n; left > 0; ) {
      const head = this.chunks[0]!;
      if (head.length > left) {
        this.chunks[0] = head.subarray(left);
        break;
      }
      left -= head.length;
      this.chunks.shift();
    }
    return out;
  }

  /** The first `n` bytes (n <= length), left in place. */
  peek(n: number): Buffer {
    const head = this.chunks[0];
    if (!head || head.length >= n) return (head ?? Buffer.alloc(0)).subarray(0, n);
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    for (const chunk of this.chunks) {
      if (filled === n) break;
      filled += chunk.copy(out, filled, 0, Math.min(chunk.length, n - filled));
    }
    return out;
  }
}

/** A stream that seals what it is given as object `objectKey` under `dataKey`. */
export function sealObject(dataKey: DataKey, objectKey: string): Transform {
  const key = keyBytes(dataKey);
  const prefix = randomBytes(8);
  const header = Buffer.concat([magic, Buffer.from([version]), prefix]);
  const pending = new ByteQueue();
  let index = 0;
  /** A chunk's three parts, pushed as they are (not copied into one). */
  const seal = (plain: Buffer, last: boolean): Buffer[] => {
    const cipher = createCipheriv('aes-256-gcm', key, nonce(prefix, index));
    cipher.setAAD(additionalData(header, objectKey, index, last));
    const body = cipher.update(plain);
    cipher.final(); // GCM adds no bytes at the end, only the tag
    const length = Buffer.alloc(lengthBytes);
    length.writeUInt32BE((body.length | (last ? lastFlag : 0)) >>> 0);
    index++;
    return [length, body, cipher.getAuthTag()];
  };
  return new Transform({
    construct(done) {
      this.push(header);
      done();
    },
    transform(chunk: Buffer, _encoding, done: TransformCallback) {
      pending.push(chunk);
      // A full chunk is sealed only once more follows it: the last one must be marked so.
      while (pending.length > sealedChunkBytes) for (const part of seal(pending.take(sealedChunkBytes), false)) this.push(part);
      done();
    },
    flush(done: TransformCallback) {
      for (const part of seal(pending.take(pending.length), true)) this.push(part);
      done();
    },
  });
}

/**
 * A stream that opens `object` as it is read from the store: with `dataKey` when it was sealed
 * (OBJECT_CORRUPT when a chunk fails its check, the object is cut short or goes on after its last
 * chunk, or it was sealed with another key), as it is when it was stored before sealing.
 */
export function openObject(object: StoredObject, dataKey: DataKey): Transform {
  if (!object.dataKeyId) return new PassThrough();
  const corrupt = (why: string): SpaceError => new SpaceError(ErrorCode.OBJECT_CORRUPT, `object ${object.key} ${why}`);
  // Known before a byte is read, and the same at every read: `details.sealedWith` says so (not worth reading again).
  if (object.dataKeyId !== dataKey.id)
    throw new SpaceError(ErrorCode.OBJECT_CORRUPT, `object ${object.key} is sealed with data key ${object.dataKeyId}, not the tenant's ${dataKey.id}`, {
      sealedWith: object.dataKeyId,
    });
  const key = keyBytes(dataKey);
  const pending = new ByteQueue();
  let header: Buffer | null = null;
  let index = 0;
  let ended = false;
  /** Opens every whole chunk received; an error names what is wrong with the object. */
  const openChunks = (push: (plain: Buffer) => void): void => {
    if (!header) {
      if (pending.length < headerBytes) return;
      header = pending.take(headerBytes);
      if (!header.subarray(0, magic.length).equals(magic) || header[magic.length] !== version)
        throw corrupt('is not a sealed object of a version this node reads');
    }
    while (pending.length >= lengthBytes) {
      if (ended) throw corrupt('goes on after its last chunk');
      const word = pending.peek(lengthBytes).readUInt32BE(0);
      const last = (word & lastFlag) !== 0;
      const length = word & ~lastFlag;
      // A hostile length would make the reader buffer without bound.
      if (length > sealedChunkBytes) throw corrupt(`has a chunk of ${length} bytes, more than the ${sealedChunkBytes} sealed in one`);
      if (pending.length < lengthBytes + length + tagBytes) return;
      pending.take(lengthBytes);
      const body = pending.take(length);
      const decipher = createDecipheriv('aes-256-gcm', key, nonce(header.subarray(magic.length + 1), index));
      decipher.setAAD(additionalData(header, object.key, index, last));
      decipher.setAuthTag(pending.take(tagBytes));
      let plain: Buffer;
      try {
        plain = Buffer.concat([decipher.update(body), decipher.final()]);
      } catch {
        throw corrupt(`fails its check at chunk ${index}: altered, or not sealed with data key ${dataKey.id}`);
      }
      index++;
      ended = last;
      push(plain);
    }
  };
  return new Transform({
    transform(chunk: Buffer, _encoding, done: TransformCallback) {
      pending.push(chunk);
      try {
        openChunks((plain) => this.push(plain));
        done();
      } catch (err) {
        done(err as Error);
      }
    },
    flush(done: TransformCallback) {
      done(ended && pending.length === 0 ? null : corrupt(ended ? 'goes on after its last chunk' : 'is cut short: it ends before its last chunk'));
    },
  });
}
