import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { sendCommands } from './send-stream.js';

const header = (version: number) => Buffer.concat([Buffer.from('btrfs-stream\0'), u32(version)]);
function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}
/** One command with string attributes, as the kernel writes it (the crc is not checked: the stream comes from the kernel through a pipe). */
function command(cmd: number, attrs: [number, string][]): Buffer {
  const body = Buffer.concat(
    attrs.map(([type, value]) => {
      const head = Buffer.alloc(4);
      head.writeUInt16LE(type, 0);
      head.writeUInt16LE(Buffer.byteLength(value), 2);
      return Buffer.concat([head, Buffer.from(value)]);
    }),
  );
  const head = Buffer.alloc(10);
  head.writeUInt32LE(body.length, 0);
  head.writeUInt16LE(cmd, 4);
  return Buffer.concat([head, body]);
}
const read = async (...chunks: Buffer[]) => {
  const out = [];
  for await (const c of sendCommands(Readable.from(chunks))) out.push(c);
  return out;
};

test('a send stream read command by command, split anywhere; what is not one is refused', async () => {
  const stream = Buffer.concat([
    header(1),
    command(3, [[15, 'a.txt']]),
    command(9, [
      [15, 'a.txt'],
      [16, 'b.txt'],
    ]),
    command(20, [[15, 'b.txt']]),
    command(21, []),
  ]);
  const whole = await read(stream);
  assert.deepEqual(whole, [
    { kind: 'create', path: 'a.txt', type: 'file' },
    { kind: 'rename', path: 'a.txt', to: 'b.txt' },
  ]);
  assert.deepEqual(await read(...Array.from(stream, (byte) => Buffer.from([byte]))), whole, 'one byte at a time');
  await assert.rejects(read(Buffer.from('not a stream at all, long enough')), /not a btrfs send stream/);
  await assert.rejects(read(header(2)), /version 2, expected 1/);
  await assert.rejects(read(stream.subarray(0, stream.length - 3)), /broke off/);
  const huge = Buffer.alloc(10);
  huge.writeUInt32LE(1 << 20, 0);
  await assert.rejects(read(header(1), huge), /a btrfs send command of 1048576 bytes/);
});
