// What sealing checkpoint objects costs: the throughput of sealing and of opening a 256 MiB object
// (AES-256-GCM in 256 KiB chunks, as nodes do on every shipment and fetch) against the floor of
// the same bytes through a pass-through stream with a sha256 (the digest shipping always computed),
// measured in the same run.
// Usage: node bench/object-sealing.mjs [--runs N] [--mib M]
import { randomBytes } from 'node:crypto';
import { PassThrough, Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Digest } from '../packages/node/dist/storage/object-store.js';
import { openObject, sealObject } from '../packages/node/dist/storage/object-sealing.js';
import { printTable, recorder } from './stats.mjs';

const arg = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const runs = arg('--runs', 7);
const mib = arg('--mib', 256);
const piece = randomBytes(64 * 1024); // pieces of 64 KiB, as a child's pipe delivers them
const dataKey = { id: 'dk_benchmark', key: randomBytes(32).toString('base64') };
const objectKey = 'checkpoints/ckp_benchmark.send';

function source() {
  let left = (mib * 2 ** 20) / piece.length;
  return new Readable({
    read() {
      this.push(left-- > 0 ? piece : null);
    },
  });
}

/** Collects what reaches it (for the opening runs' input) or only counts it. */
function sink(keep) {
  const chunks = [];
  return {
    chunks,
    stream: new Writable({
      write(chunk, _e, done) {
        if (keep) chunks.push(chunk);
        done();
      },
    }),
  };
}

async function mibPerSecond(...stages) {
  const started = performance.now();
  await pipeline(...stages);
  return mib / ((performance.now() - started) / 1000);
}

const { results, rows, record } = recorder();
const floor = [];
const seal = [];
const open = [];
let sealedBytes = 0;
for (let run = 0; run < runs; run++) {
  floor.push(await mibPerSecond(source(), new Digest(), new PassThrough(), sink(false).stream));
  const kept = sink(true);
  seal.push(await mibPerSecond(source(), sealObject(dataKey, objectKey), new Digest(), kept.stream));
  sealedBytes = kept.chunks.reduce((n, c) => n + c.length, 0);
  const stored = { key: objectKey, bytes: sealedBytes, sha256: '0'.repeat(64), dataKeyId: dataKey.id };
  open.push(await mibPerSecond(Readable.from(kept.chunks), new Digest(), openObject(stored, dataKey), sink(false).stream));
}
record('floor: pass-through + sha256', floor, 'MiB/s');
record('seal (AES-256-GCM) + sha256', seal, 'MiB/s');
record('open (sha256 + AES-256-GCM)', open, 'MiB/s');
const median = (name) => results[name].median;
const ratios = {
  sealOfFloor: median('seal (AES-256-GCM) + sha256') / median('floor: pass-through + sha256'),
  openOfFloor: median('open (sha256 + AES-256-GCM)') / median('floor: pass-through + sha256'),
  storedOverhead: sealedBytes / (mib * 2 ** 20) - 1,
};
console.log(`${mib} MiB object, ${runs} runs each`);
printTable(rows);
console.log(
  `seal at ${(ratios.sealOfFloor * 100).toFixed(0)}% of the floor's throughput, open at ${(ratios.openOfFloor * 100).toFixed(0)}%; stored bytes +${(ratios.storedOverhead * 100).toFixed(4)}%`,
);
console.log(JSON.stringify({ mib, runs, results, ratios }));
