import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { pipeline } from 'node:stream/promises';
import { test } from 'node:test';
import type { DataKey, StoredObject } from '@space/protocol';
import { openObject, sealObject, sealedChunkBytes } from './object-sealing.js';

const dataKey: DataKey = { id: 'dk_test0001', key: randomBytes(32).toString('base64') };
const otherKey: DataKey = { id: 'dk_test0002', key: randomBytes(32).toString('base64') };
const objectKey = 'checkpoints/ckp_sealtest.send';

/** `bytes` sealed, fed to the sealer in pieces of `piece` bytes. */
async function seal(bytes: Buffer, key = dataKey, piece = 100_000): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += piece) pieces.push(bytes.subarray(at, at + piece));
  const sealer = sealObject(key, objectKey);
  const [sealed] = await Promise.all([buffer(sealer), pipeline(Readable.from(pieces), sealer)]);
  return sealed;
}

async function open(sealed: Buffer, object: Partial<StoredObject> = {}, key = dataKey, piece = 7_777): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for (let at = 0; at < sealed.length; at += piece) pieces.push(sealed.subarray(at, at + piece));
  const opener = openObject({ key: objectKey, bytes: sealed.length, sha256: '0'.repeat(64), dataKeyId: key.id, ...object }, key);
  const [plain] = await Promise.all([buffer(opener), pipeline(Readable.from(pieces), opener)]);
  return plain;
}

test('objects of every size around the chunk size come back byte for byte, and none of their bytes is in what is stored', async () => {
  for (const size of [0, 1, sealedChunkBytes - 1, sealedChunkBytes, sealedChunkBytes + 1, 3 * sealedChunkBytes + 12_345]) {
    // A recognisable run of text, as a file's content or a secret placeholder would be.
    const plain = Buffer.from('SPACE-KNOWN-BYTES-'.repeat(Math.ceil(size / 18) + 1)).subarray(0, size);
    const sealed = await seal(plain);
    const chunks = Math.max(1, Math.ceil(size / sealedChunkBytes));
    assert.equal(sealed.length, size + 13 + chunks * 20, `${size}: a header, and a length and a tag per chunk`);
    if (size >= 18) assert.equal(sealed.includes('SPACE-KNOWN-BYTES-'), false, `${size}: no plaintext in the sealed object`);
    assert.deepEqual(await open(sealed), plain, `${size}: read back whole`);
  }
});

test('two sealings of the same bytes differ (a fresh nonce prefix per object)', async () => {
  const plain = randomBytes(1000);
  assert.notDeepEqual(await seal(plain), await seal(plain));
});

test('an altered, cut, lengthened, reordered, moved or foreign object is refused, and nothing of a bad chunk is read out', async () => {
  const plain = randomBytes(2 * sealedChunkBytes + 500);
  const sealed = await seal(plain);
  const flipped = Buffer.from(sealed);
  flipped[sealedChunkBytes + 40]! ^= 1;
  await assert.rejects(open(flipped), { code: 'OBJECT_CORRUPT', message: /fails its check at chunk 1/ });
  // What was read out before the failure is the first chunk, checked, and nothing of the altered one.
  const readOut: Buffer[] = [];
  const opener = openObject({ key: objectKey, bytes: flipped.length, sha256: '0'.repeat(64), dataKeyId: dataKey.id }, dataKey);
  opener.on('data', (chunk: Buffer) => void readOut.push(chunk));
  await assert.rejects(pipeline(Readable.from([flipped]), opener), { code: 'OBJECT_CORRUPT' });
  assert.deepEqual(Buffer.concat(readOut), plain.subarray(0, sealedChunkBytes));
  for (const cut of [5, 13, 20, sealedChunkBytes + 33, sealed.length - 1]) {
    await assert.rejects(open(sealed.subarray(0, cut)), { code: 'OBJECT_CORRUPT', message: /cut short/ }, `cut at ${cut}`);
  }
  // Cut exactly after a whole chunk that is not the last: still refused.
  const firstChunkEnd = 13 + 4 + sealedChunkBytes + 16;
  await assert.rejects(open(sealed.subarray(0, firstChunkEnd)), { code: 'OBJECT_CORRUPT', message: /cut short/ });
  await assert.rejects(open(Buffer.concat([sealed, Buffer.from('more')])), { code: 'OBJECT_CORRUPT', message: /goes on after its last chunk/ });
  await assert.rejects(open(Buffer.concat([sealed, Buffer.from('xy')])), { code: 'OBJECT_CORRUPT', message: /goes on after its last chunk/ });
  // The second chunk in the first one's place.
  const chunk = (i: number) => sealed.subarray(13 + i * (4 + sealedChunkBytes + 16), 13 + (i + 1) * (4 + sealedChunkBytes + 16));
  const swapped = Buffer.concat([sealed.subarray(0, 13), chunk(1), chunk(0), sealed.subarray(13 + 2 * (4 + sealedChunkBytes + 16))]);
  await assert.rejects(open(swapped), { code: 'OBJECT_CORRUPT', message: /fails its check at chunk 0/ });
  // The same bytes presented as another object (the key is in every chunk's additional data).
  await assert.rejects(open(sealed, { key: 'checkpoints/ckp_another.send' }), { code: 'OBJECT_CORRUPT', message: /fails its check/ });
  // Under another tenant's key, whether the record names it or not.
  await assert.rejects(open(sealed, {}, otherKey), { code: 'OBJECT_CORRUPT', message: /not sealed with data key dk_test0002/ });
  assert.throws(() => openObject({ key: objectKey, bytes: 1, sha256: '0'.repeat(64), dataKeyId: dataKey.id }, otherKey), {
    code: 'OBJECT_CORRUPT',
    message: /sealed with data key dk_test0001, not the tenant's dk_test0002/,
  });
  // A hostile length field is refused before anything is buffered for it.
  const huge = Buffer.from(sealed.subarray(0, 17));
  huge.writeUInt32BE(0x7fff_ffff, 13);
  await assert.rejects(open(huge), { code: 'OBJECT_CORRUPT', message: /more than the 262144 sealed in one/ });
  await assert.rejects(open(Buffer.from('not a sealed object at all')), { code: 'OBJECT_CORRUPT', message: /not a sealed object/ });
});

test('an object stored before sealing (no data key recorded) is read as it is', async () => {
  const plain = randomBytes(5000);
  assert.deepEqual(await open(plain, { dataKeyId: undefined }), plain);
});
