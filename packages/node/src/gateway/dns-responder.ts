import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';

/** The address every name resolves to inside a sandbox; its traffic to ports 80 and 443 reaches the gateway. */
export const gatewayAddress = '198.18.0.1';

const typeA = 1;
const classIn = 1;

/**
 * Builds the answer to one DNS query: every A question gets `address`, any other type an empty
 * NOERROR answer (so clients fall back to IPv4). Returns null for anything that is not a plain,
 * single-question standard query: those are dropped, not answered. The packet comes from a sandbox:
 * every offset is bounds-checked.
 */
export function answerQuery(query: Buffer, address: string, ttlSeconds = 60): Buffer | null {
  if (query.length < 12 || query.length > 512) return null;
  const flags = query.readUInt16BE(2);
  const isResponse = flags & 0x8000;
  const opcode = (flags >> 11) & 0xf;
  if (isResponse || opcode !== 0 || query.readUInt16BE(4) !== 1) return null;
  let offset = 12;
  for (let labels = 0; ; labels++) {
    if (offset >= query.length || labels > 127) return null;
    const length = query[offset]!;
    if (length === 0) break;
    if (length > 63) return null; // compression pointers have no place in a question
    offset += 1 + length;
  }
  offset += 1;
  if (offset + 4 > query.length) return null;
  const qtype = query.readUInt16BE(offset);
  const qclass = query.readUInt16BE(offset + 2);
  const question = query.subarray(12, offset + 4);
  const answer = qtype === typeA && qclass === classIn;
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0); // id
  header.writeUInt16BE(0x8000 | (flags & 0x0100) | 0x0080, 2); // QR, RD copied, RA; NOERROR
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answer ? 1 : 0, 6);
  if (!answer) return Buffer.concat([header, question]);
  const record = Buffer.alloc(16);
  record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
  record.writeUInt16BE(typeA, 2);
  record.writeUInt16BE(classIn, 4);
  record.writeUInt32BE(ttlSeconds, 6);
  record.writeUInt16BE(4, 10);
  address.split('.').forEach((octet, i) => record.writeUInt8(Number(octet), 12 + i));
  return Buffer.concat([header, question, record]);
}

/**
 * The sandboxes' DNS server. Names are not resolved here: every name points at the gateway, which
 * reads the real host from the request (Host header or TLS SNI) and resolves it itself under the
 * session's policy. Only sandbox addresses are answered.
 */
export class DnsResponder {
  private socket: Socket | null = null;
  port = 0;

  constructor(private readonly isSandbox: (ip: string) => boolean) {}

  async start(host = '0.0.0.0'): Promise<void> {
    const socket = createSocket('udp4');
    socket.on('message', (message: Buffer, remote: RemoteInfo) => {
      if (!this.isSandbox(remote.address)) return;
      const reply = answerQuery(message, gatewayAddress);
      if (reply) socket.send(reply, remote.port, remote.address);
    });
    socket.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, host, () => resolve());
    });
    this.socket = socket;
    this.port = socket.address().port;
  }

  async stop(): Promise<void> {
    const socket = this.socket;
    this.socket = null;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }
}
