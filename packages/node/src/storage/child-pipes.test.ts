import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { test } from 'node:test';
import { finished, toStdin } from './child-pipes.js';

/** A child that reads its stdin slowly (so the pipe stays full and the last writes queue) and prints how many bytes it got. */
const slowReader = `let n = 0;
process.stdin.on('data', (b) => { n += b.length; process.stdin.pause(); setTimeout(() => process.stdin.resume(), 3); });
process.stdin.on('end', () => console.log(n));`;

test('a child fed through toStdin gets every byte, also those still queued in its stdin when the pipeline finishes', async () => {
  const chunks = 1000;
  const chunkBytes = 1000;
  // Three rounds: before the fix, a round lost its last queued kilobytes 4 times in 5.
  for (let round = 0; round < 3; round++) {
    const child = spawn(process.execPath, ['-e', slowReader], { stdio: ['pipe', 'pipe', 'pipe'] });
    let printed = '';
    child.stdout!.on('data', (d: Buffer) => (printed += d));
    const done = finished(child, 'the slow reader');
    await pipeline(Readable.from(Array.from({ length: chunks }, () => Buffer.alloc(chunkBytes, round))), toStdin(child));
    await done;
    assert.equal(Number(printed), chunks * chunkBytes, `round ${round}`);
  }
});

test('a child that stops reading early does not fail the pipeline: its exit code says how it went', async () => {
  const child = spawn('head', ['-c', '10'], { stdio: ['pipe', 'ignore', 'pipe'] });
  const done = finished(child, 'head');
  await pipeline(Readable.from(Array.from({ length: 100 }, () => Buffer.alloc(100_000))), toStdin(child));
  await done;
});
