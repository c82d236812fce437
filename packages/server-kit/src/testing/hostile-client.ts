import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';

/**
 * A client that breaks the rules on purpose, for tests of what the servers do with hostile input:
 * WebSocket frames no conforming client sends, and raw HTTP requests. Test support only.
 */

/** A masked client frame: FIN set, `opcode`, `payload`, with optional RSV bits and a forged length field. */
function clientFrame(opcode: number, payload: Buffer, options: { rsv1?: boolean; masked?: boolean; fin?: boolean } = {}): Buffer {
  const masked = options.masked ?? true;
  const first = (options.fin === false ? 0 : 0x80) | (options.rsv1 ? 0x40 : 0) | opcode;
  const length = payload.length < 126 ? Buffer.from([payload.length]) : Buffer.concat([Buffer.from([126]), u16(payload.length)]);
  length[0]! |= masked ? 0x80 : 0;
  const mask = masked ? randomBytes(4) : Buffer.alloc(0);
  const body = masked ? Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!)) : payload;
  return Buffer.concat([Buffer.from([first]), length, mask, body]);
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

/** A masked frame header that announces `length` bytes (64-bit length field) and carries none of them. */
function announcedLength(length: bigint): Buffer {
  const header = Buffer.alloc(2 + 8 + 4);
  header[0] = 0x81;
  header[1] = 0x80 | 127;
  header.writeBigUInt64BE(length, 2);
  return header;
}

/** Each malformed first frame and the close code RFC 6455 names for it. */
export const malformedFrames: Record<string, { frame: Buffer; closeCode: number }> = {
  'text frame with invalid UTF-8': { frame: clientFrame(0x1, Buffer.from([0x7b, 0xff, 0xfe, 0x7d])), closeCode: 1007 },
  'frame over the size limit': { frame: announcedLength(3n * 1024n * 1024n), closeCode: 1009 },
  'unmasked client frame': { frame: clientFrame(0x1, Buffer.from('{}'), { masked: false }), closeCode: 1002 },
  'reserved opcode': { frame: clientFrame(0x3, Buffer.from('{}')), closeCode: 1002 },
  'RSV1 set without an extension': { frame: clientFrame(0x1, Buffer.from('{}'), { rsv1: true }), closeCode: 1002 },
  'length of 2^63': { frame: announcedLength(1n << 63n), closeCode: 1009 },
  'stray continuation frame': { frame: clientFrame(0x0, Buffer.from('{}')), closeCode: 1002 },
};

export interface RawFrameResult {
  /** Status of the handshake reply (101 when the upgrade was accepted). */
  status: number;
  /** Close code of the close frame the server sent, or null if it sent none. */
  closeCode: number | null;
}

/**
 * Opens a WebSocket by hand on `host:port` at `path`, sends `frame` as the first frame, and reports
 * the close code the server answered with. Gives up (closeCode null) after `timeoutMs`.
 */
export function sendRawFrame(
  host: string,
  port: number,
  path: string,
  headers: Record<string, string>,
  frame: Buffer,
  timeoutMs = 5000,
): Promise<RawFrameResult> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, host);
    let received = Buffer.alloc(0);
    let status = 0;
    let headerEnd = -1;
    const timer = setTimeout(() => finish(), timeoutMs);
    const finish = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ status, closeCode: closeCodeIn(headerEnd < 0 ? Buffer.alloc(0) : received.subarray(headerEnd + 4)) });
    };
    socket.on('error', (err) => (status ? finish() : reject(err)));
    socket.on('close', finish);
    socket.on('connect', () => {
      const lines = [
        `GET ${path} HTTP/1.1`,
        `Host: ${host}:${port}`,
        'Upgrade: websocket',
        'Connection: Upgrade',
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
        'Sec-WebSocket-Version: 13',
      ];
      for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (headerEnd >= 0) return;
      headerEnd = received.indexOf('\r\n\r\n');
      if (headerEnd < 0) return;
      status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received.toString('latin1', 0, 16))?.[1] ?? 0);
      if (status === 101) socket.write(frame);
      else finish();
    });
  });
}

/** The code of the first close frame (opcode 8) in a run of unmasked server frames. */
function closeCodeIn(frames: Buffer): number | null {
  let at = 0;
  while (at + 2 <= frames.length) {
    const opcode = frames[at]! & 0x0f;
    let length = frames[at + 1]! & 0x7f;
    let start = at + 2;
    if (length === 126) {
      length = frames.readUInt16BE(at + 2);
      start += 2;
    } else if (length === 127) {
      length = Number(frames.readBigUInt64BE(at + 2));
      start += 8;
    }
    if (opcode === 0x8) return length >= 2 && start + 2 <= frames.length ? frames.readUInt16BE(start) : 1005;
    at = start + length;
  }
  return null;
}

/** Sends `raw` bytes as they are on a new connection and returns everything the server answered. */
export function sendRawRequest(host: string, port: number, raw: string | Buffer, timeoutMs = 5000): Promise<{ reply: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, host);
    let reply = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ reply, closed: false });
    }, timeoutMs);
    socket.on('error', (err) => (reply ? undefined : reject(err)));
    socket.on('data', (chunk: Buffer) => (reply += chunk.toString('latin1')));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ reply, closed: true });
    });
    socket.on('connect', () => socket.write(raw));
  });
}
