/**
 * Errors of connect-es that blame the server (`internal`) for what the client sent: a body that is
 * not a valid protobuf message, and a compressed envelope with no encoding named. Both are the
 * client's: `invalid_argument`, on the unary path and in a stream's end message alike.
 */
export function isClientFault(error: { code?: string; message?: string }): boolean {
  return (
    error.code === 'internal' &&
    typeof error.message === 'string' &&
    (error.message.startsWith('parse binary:') || error.message.startsWith('received compressed envelope'))
  );
}

/** The client's fault, as a Connect error body. */
export function asClientFault(error: { message?: string }): { code: 'invalid_argument'; message: string } {
  return { code: 'invalid_argument', message: `the request is not a valid message: ${error.message}` };
}

const endStreamFlag = 0b10;
const compressedFlag = 0b01;

/**
 * A Connect stream's envelopes (flags, 32-bit length, data) passed on as they arrive; only the end
 * message (JSON `{error?, metadata?}`) is held whole, and its error corrected when it is the client's
 * fault. Anything that does not parse as envelopes passes unchanged.
 */
export async function* withCorrectedEndStream(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  let header = Buffer.alloc(0);
  /** Bytes of a data envelope still to pass through. */
  let passing = 0;
  /** The end message being collected (header included) and how long it is in all. */
  let end: Buffer[] | null = null;
  let endLength = 0;
  let collected = 0;
  for await (const raw of body) {
    let chunk = Buffer.from(raw);
    while (chunk.length > 0) {
      if (passing > 0) {
        const piece = chunk.subarray(0, passing);
        passing -= piece.length;
        chunk = chunk.subarray(piece.length);
        yield piece;
      } else if (end) {
        const piece = chunk.subarray(0, endLength - collected);
        end.push(piece);
        collected += piece.length;
        chunk = chunk.subarray(piece.length);
        if (collected === endLength) {
          yield correctedEnd(Buffer.concat(end));
          end = null;
        }
      } else {
        const need = 5 - header.length;
        header = Buffer.concat([header, chunk.subarray(0, need)]);
        chunk = chunk.subarray(need);
        if (header.length < 5) continue;
        const flags = header[0]!;
        const length = header.readUInt32BE(1);
        if ((flags & endStreamFlag) !== 0 && (flags & compressedFlag) === 0) {
          end = [header];
          endLength = 5 + length;
          collected = 5;
          if (length === 0) {
            yield correctedEnd(Buffer.concat(end));
            end = null;
          }
        } else {
          yield header;
          passing = length;
        }
        header = Buffer.alloc(0);
      }
    }
  }
  if (header.length) yield header;
  if (end) yield Buffer.concat(end);
}

function correctedEnd(envelope: Buffer): Uint8Array {
  let message: { error?: { code?: string; message?: string } };
  try {
    message = JSON.parse(envelope.subarray(5).toString('utf8'));
  } catch {
    return envelope;
  }
  if (!message.error || !isClientFault(message.error)) return envelope;
  const data = Buffer.from(JSON.stringify({ ...message, error: asClientFault(message.error) }));
  const header = Buffer.alloc(5);
  header[0] = envelope[0]!;
  header.writeUInt32BE(data.length, 1);
  return Buffer.concat([header, data]);
}
