import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { makeTestCertificates } from '@space/server-kit';
import { startLoopbackS3 } from './loopback-s3.js';
import { Digest, S3ObjectStore } from './object-store.js';

test('the loopback S3 server: what a PUT or a multipart upload stored reads back whole at once, and no partial file stays', async () => {
  const directory = await mkdtemp(path.join(tmpdir(), 'space-s3-test-'));
  const s3 = await startLoopbackS3({ directory });
  try {
    const store = new S3ObjectStore({
      bucket: s3.bucket,
      prefix: 'test',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    // One part, and three parts of 8 MiB (the last one short), written side by side.
    const sizes = [100_003, 17 * 2 ** 20 + 5];
    await Promise.all(
      sizes.map(async (size, i) => {
        const data = randomBytes(size);
        const stored = await store.put(`object-${i}`, Readable.from([data.subarray(0, size >> 1), data.subarray(size >> 1)]));
        const read = new Digest();
        await pipeline(await store.get(`object-${i}`), read, new Writable({ write: (_chunk, _encoding, callback) => callback() }));
        assert.deepEqual({ bytes: read.bytes, sha256: read.sha256() }, { bytes: size, sha256: stored.sha256 });
      }),
    );
    const files = readdirSync(directory, { recursive: true }).map(String);
    assert.deepEqual(
      files.filter((f) => f.endsWith('.writing')),
      [],
    );
  } finally {
    await s3.stop();
    await rm(directory, { recursive: true, force: true });
  }
});

test('an https:// object store: its certificate is verified against SPACE_S3_CA_FILE (added to the system CAs); without it the call fails on the certificate', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'space-s3-tls-'));
  const certificates = makeTestCertificates(path.join(dir, 'tls'), ['127.0.0.1'], 'SPACE test object store CA');
  const s3 = await startLoopbackS3({ directory: path.join(dir, 'objects'), tls: certificates });
  const store = (ca?: string) =>
    new S3ObjectStore({
      bucket: s3.bucket,
      prefix: 'tls',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      ...(ca ? { ca } : {}),
    });
  try {
    assert.match(s3.endpoint, /^https:\/\/127\.0\.0\.1:\d+$/);
    const trusted = store(readFileSync(certificates.caFile, 'utf8'));
    const stored = await trusted.put('object', Readable.from([Buffer.from('over TLS')]));
    const chunks: Buffer[] = [];
    for await (const chunk of await trusted.get('object')) chunks.push(chunk as Buffer);
    assert.deepEqual([Buffer.concat(chunks).toString(), stored.bytes], ['over TLS', 8]);
    await assert.rejects(store().get('object'), /self-signed certificate|unable to get local issuer certificate|certificate/i);
  } finally {
    await s3.stop();
    await rm(dir, { recursive: true, force: true });
  }
});
