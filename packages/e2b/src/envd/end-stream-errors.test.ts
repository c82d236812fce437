import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withCorrectedEndStream } from './end-stream-errors.js';

function framed(flags: number, data: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header[0] = flags;
  header.writeUInt32BE(data.length, 1);
  return Buffer.concat([header, data]);
}

async function collect(chunks: Buffer[]): Promise<Buffer> {
  const out: Uint8Array[] = [];
  for await (const piece of withCorrectedEndStream(
    (async function* () {
      yield* chunks;
    })(),
  ))
    out.push(piece);
  return Buffer.concat(out);
}

test("a stream's envelopes pass as they are, and only a client-fault end message is corrected, however the bytes are split", async () => {
  const data = framed(0, Buffer.from('payload that passes through'));
  const fault = framed(2, Buffer.from(JSON.stringify({ error: { code: 'internal', message: 'parse binary: premature EOF' } })));
  const serverFault = framed(2, Buffer.from(JSON.stringify({ error: { code: 'internal', message: 'internal error' } })));
  const stream = Buffer.concat([data, data, fault]);
  for (const size of [1, 2, 5, 7, stream.length]) {
    const chunks: Buffer[] = [];
    for (let i = 0; i < stream.length; i += size) chunks.push(stream.subarray(i, i + size));
    const out = await collect(chunks);
    assert.deepEqual(out.subarray(0, data.length * 2), Buffer.concat([data, data]), `split every ${size}`);
    const end = out.subarray(data.length * 2);
    assert.equal(end.readUInt32BE(1), end.length - 5);
    assert.equal(JSON.parse(end.subarray(5).toString()).error.code, 'invalid_argument', `split every ${size}`);
  }
  assert.deepEqual(await collect([data, serverFault]), Buffer.concat([data, serverFault]), "the server's own faults stay internal");
  assert.deepEqual(await collect([framed(2, Buffer.alloc(0))]), framed(2, Buffer.alloc(0)));
  assert.deepEqual(await collect([Buffer.from([1, 2])]), Buffer.from([1, 2]), 'what is not an envelope passes');
});
