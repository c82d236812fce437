import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * An S3-compatible server on loopback (s3rver) with one bucket, for tests and `space cluster up`
 * only (production points at S3, MinIO, Ceph RGW, R2, ...). Loaded only when used.
 */
export async function startLoopbackS3(
  options: { bucket?: string; directory?: string } = {},
): Promise<{ endpoint: string; bucket: string; stop(): Promise<void> }> {
  const { default: S3rver } = await import('s3rver');
  const bucket = options.bucket ?? 'space';
  // In `directory` the objects are kept across starts; otherwise in a temporary one, removed by stop().
  const directory = options.directory ?? mkdtempSync(path.join(tmpdir(), 'space-s3-'));
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    async stop() {
      await server.close();
      if (!options.directory) rmSync(directory, { recursive: true, force: true });
    },
  };
}
