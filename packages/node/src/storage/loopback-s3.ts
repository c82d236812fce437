import { createHash } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { S3rverStore } from 's3rver';

/**
 * An S3-compatible server on loopback (s3rver) with one bucket, for tests and `space cluster up`
 * only (production points at S3, MinIO, Ceph RGW, R2, ...). Loaded only when used.
 */
export async function startLoopbackS3(
  options: { bucket?: string; directory?: string; tls?: { certFile: string; keyFile: string } } = {},
): Promise<{ endpoint: string; bucket: string; stop(): Promise<void> }> {
  const { default: S3rver } = await import('s3rver');
  const bucket = options.bucket ?? 'space';
  // In `directory` the objects are kept across starts; otherwise in a temporary one, removed by stop().
  const directory = options.directory ?? mkdtempSync(path.join(tmpdir(), 'space-s3-'));
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const tls = options.tls ? { cert: readFileSync(options.tls.certFile), key: readFileSync(options.tls.keyFile) } : {};
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: [{ name: bucket }], ...tls });
  writeWholeBeforeAnswering(server.store);
  const { port } = await server.run();
  return {
    endpoint: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    bucket,
    async stop() {
      await server.close();
      if (!options.directory) rmSync(directory, { recursive: true, force: true });
    },
  };
}

/**
 * s3rver 3.7 answers a PUT (of an object or of a part) once its bytes have passed its digest, while
 * they may still be on their way to the file: a GET that follows at once, or the concatenation of
 * the parts when the upload completes, can read a short file and serve it as the whole object (a
 * node then received a base that ended mid-command: "btrfs receive ... short read from stream").
 * S3 promises read-after-write, so here both write their file whole, under another name renamed
 * into place, before they answer.
 */
function writeWholeBeforeAnswering(store: S3rverStore): void {
  store.putObject = async (object) => {
    const written = await writeWhole(object.content, store.getResourcePath(object.bucket, object.key, 'object'));
    await store.putMetadata(object.bucket, object.key, object.metadata, written.md5);
    return written;
  };
  store.putPart = async (bucketName, uploadId, partNumber, content) => {
    const partPath = path.join(store.getResourcePath(bucketName, undefined, 'uploads'), uploadId, String(partNumber));
    const written = await writeWhole(content, partPath);
    await writeFile(`${partPath}.md5`, written.md5);
    return written;
  };
}

async function writeWhole(content: Buffer | Readable, file: string): Promise<{ size: number; md5: string }> {
  await mkdir(path.dirname(file), { recursive: true });
  const md5 = createHash('md5');
  let size = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      md5.update(chunk);
      size += chunk.length;
      callback(null, chunk);
    },
  });
  const partial = `${file}.writing`;
  try {
    await pipeline(Buffer.isBuffer(content) ? Readable.from([content]) : content, counted, createWriteStream(partial));
    await rename(partial, file);
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
  return { size, md5: md5.digest('hex') };
}
