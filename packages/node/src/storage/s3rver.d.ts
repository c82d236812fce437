// s3rver (a loopback S3 server for tests) ships no types; what SPACE uses of it.
declare module 's3rver' {
  import type { Readable } from 'node:stream';

  interface S3rverOptions {
    port?: number;
    address?: string;
    silent?: boolean;
    directory: string;
    configureBuckets?: { name: string }[];
  }
  interface Written {
    size: number;
    md5: string;
  }
  /** Its filesystem store (lib/stores/filesystem.js): the methods loopback-s3.ts replaces and those they call. */
  export interface S3rverStore {
    getResourcePath(bucket: string, key: string | undefined, resource: string): string;
    putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5: string): Promise<void>;
    putObject(object: { bucket: string; key: string; content: Buffer | Readable; metadata: Record<string, string> }): Promise<Written>;
    putPart(bucket: string, uploadId: string, partNumber: number, content: Readable): Promise<Written>;
  }
  export default class S3rver {
    constructor(options: S3rverOptions);
    readonly store: S3rverStore;
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
  }
}
