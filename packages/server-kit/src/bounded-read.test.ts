import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { ErrorCode, SpaceError } from '@space/protocol';
import { readBounded } from './bounded-read.js';

/** Options whose errors count how often each was made. */
function counted() {
  const made = { overflow: 0, interrupted: 0 };
  return {
    made,
    options: {
      overflow: () => (made.overflow++, new SpaceError(ErrorCode.PAYLOAD_TOO_LARGE, 'too large')),
      interrupted: () => (made.interrupted++, new SpaceError(ErrorCode.REQUEST_ABORTED, 'broke off')),
      drain: false,
    },
  };
}

test('a complete read makes no error, though its stream closes after its end (an error and its stack are made only as the outcome)', async () => {
  const { made, options } = counted();
  const stream = new PassThrough();
  const closed = new Promise((resolve) => stream.once('close', resolve));
  const read = readBounded(stream, 16, options);
  stream.end('hello');
  assert.equal((await read).toString(), 'hello');
  await closed;
  assert.deepEqual(made, { overflow: 0, interrupted: 0 });
});

test('a read that breaks off or overflows fails with its own error, made once', async () => {
  const broken = counted();
  const cut = new PassThrough();
  const read = readBounded(cut, 16, broken.options);
  cut.write('part');
  cut.destroy(new Error('reset'));
  await assert.rejects(read, { code: 'REQUEST_ABORTED' });
  assert.deepEqual(broken.made, { overflow: 0, interrupted: 1 });

  const big = counted();
  const long = new PassThrough();
  const closed = new Promise((resolve) => long.once('close', resolve));
  const tooMuch = readBounded(long, 4, big.options);
  long.write('more than four bytes');
  await assert.rejects(tooMuch, { code: 'PAYLOAD_TOO_LARGE' });
  await closed;
  assert.deepEqual(big.made, { overflow: 1, interrupted: 0 });
});
