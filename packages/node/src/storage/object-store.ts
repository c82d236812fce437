import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { Agent } from 'node:https';
import { rootCertificates } from 'node:tls';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectCommand, GetObjectCommand, NoSuchKey, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { ErrorCode, SpaceError } from '@space/protocol';

/** What was stored: its size and sha256, recorded by the control plane and checked on every read. */
export interface StoredObject {
  key: string;
  bytes: number;
  sha256: string;
}

/**
 * Where checkpoints go so that any node can restore them: a directory (a shared mount) or an
 * S3-compatible bucket. Bodies are streamed both ways: memory stays bounded whatever the size.
 */
export interface ObjectStore {
  /** For messages: the store without credentials. */
  readonly description: string;
  put(key: string, body: Readable): Promise<StoredObject>;
  /** The object's bytes; OBJECT_NOT_FOUND when there is none. */
  get(key: string): Promise<Readable>;
  /** Deletes the object; one that is not there is no error. */
  delete(key: string): Promise<void>;
}

/** A pass-through that counts and hashes what flows through it. */
export class Digest extends Transform {
  private readonly hash = createHash('sha256');
  bytes = 0;
  /** Whether everything passed: the stream it read from ended. */
  complete = false;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    this.push(chunk);
    done();
  }

  override _flush(done: () => void): void {
    this.complete = true;
    done();
  }

  /** The sha256 of everything that passed (call once, at the end). */
  sha256(): string {
    return this.hash.digest('hex');
  }
}

function notFound(store: string, key: string): SpaceError {
  return new SpaceError(ErrorCode.OBJECT_NOT_FOUND, `no object ${key} in ${store}`);
}

/** Objects as files under a directory (`file:///dir`): written under `.partial`, renamed when complete and synced. */
export class FileObjectStore implements ObjectStore {
  readonly description: string;

  constructor(private readonly dir: string) {
    this.description = `file://${dir}`;
  }

  async put(key: string, body: Readable): Promise<StoredObject> {
    const file = this.file(key);
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const partial = `${file}.partial`;
    const digest = new Digest();
    try {
      await pipeline(body, digest, createWriteStream(partial, { mode: 0o600, flush: true }));
      await rename(partial, file);
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
    return { key, bytes: digest.bytes, sha256: digest.sha256() };
  }

  async get(key: string): Promise<Readable> {
    const file = this.file(key);
    if (!(await stat(file).catch(() => null))) throw notFound(this.description, key);
    return createReadStream(file);
  }

  async delete(key: string): Promise<void> {
    await rm(this.file(key), { force: true });
  }

  private file(key: string): string {
    const file = path.resolve(this.dir, key);
    if (!file.startsWith(`${path.resolve(this.dir)}/`)) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `object key ${JSON.stringify(key)} leaves the store`);
    return file;
  }
}

export interface S3Settings {
  bucket: string;
  prefix: string;
  /** `SPACE_S3_ENDPOINT`: for S3-compatible stores (MinIO, Ceph RGW, R2, ...); AWS's by default. */
  endpoint?: string;
  /** `SPACE_S3_REGION`, default us-east-1. */
  region?: string;
  /** `SPACE_S3_FORCE_PATH_STYLE=1`: bucket in the path, as most S3-compatible stores want. */
  forcePathStyle?: boolean;
  /** Credentials: `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` or any source of the AWS SDK's default chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** The CA of `SPACE_S3_CA_FILE` (PEM): an `https://` endpoint's certificate may be signed by it, besides the system's. */
  ca?: string;
}

/** Objects in an S3-compatible bucket (`s3://bucket/prefix`); uploads are multipart and streamed. */
export class S3ObjectStore implements ObjectStore {
  readonly description: string;
  private readonly client: S3Client;

  constructor(private readonly settings: S3Settings) {
    this.description = `s3://${settings.bucket}/${settings.prefix}`;
    this.client = new S3Client({
      region: settings.region ?? 'us-east-1',
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      forcePathStyle: settings.forcePathStyle ?? false,
      ...(settings.credentials ? { credentials: settings.credentials } : {}),
      // Added to the system's CAs, not in their place; certificates are verified either way.
      ...(settings.ca ? { requestHandler: { httpsAgent: new Agent({ keepAlive: true, ca: [...rootCertificates, settings.ca] }) } } : {}),
    });
  }

  async put(key: string, body: Readable): Promise<StoredObject> {
    const digest = new Digest();
    const counted = new PassThrough();
    const piping = pipeline(body, digest, counted);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.settings.bucket, Key: this.key(key), Body: counted },
      // 8 MiB parts, two in flight: at most ~16 MiB of a checkpoint in memory.
      partSize: 8 * 2 ** 20,
      queueSize: 2,
    });
    await Promise.all([upload.done(), piping]);
    return { key, bytes: digest.bytes, sha256: digest.sha256() };
  }

  async get(key: string): Promise<Readable> {
    try {
      const reply = await this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: this.key(key) }));
      return reply.Body as Readable;
    } catch (err) {
      if (err instanceof NoSuchKey || (err as { name?: string }).name === 'NoSuchKey') throw notFound(this.description, key);
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: this.key(key) }));
  }

  private key(key: string): string {
    return this.settings.prefix ? `${this.settings.prefix.replace(/\/$/, '')}/${key}` : key;
  }
}

/** What `objectStoreFrom` reads: `SPACE_OBJECT_STORE` (its shape checked by the setting) and the S3 settings. */
export interface ObjectStoreSettings {
  objectStore: string | undefined;
  s3Endpoint: string | undefined;
  s3Region: string;
  s3ForcePathStyle: boolean;
}

/**
 * The object store `SPACE_OBJECT_STORE` names: `file:///dir` or `s3://bucket/prefix` (with
 * `SPACE_S3_ENDPOINT`, `SPACE_S3_REGION`, `SPACE_S3_FORCE_PATH_STYLE`, the AWS SDK's credentials
 * from `env`, and `s3Ca`, the PEM of `SPACE_S3_CA_FILE`), or null when unset.
 */
export function objectStoreFrom(settings: ObjectStoreSettings, env: NodeJS.ProcessEnv, s3Ca?: string): ObjectStore | null {
  if (!settings.objectStore) return null;
  const url = new URL(settings.objectStore);
  if (url.protocol === 'file:') return new FileObjectStore(decodeURIComponent(url.pathname));
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  return new S3ObjectStore({
    bucket: url.hostname,
    prefix: decodeURIComponent(url.pathname.replace(/^\//, '')),
    endpoint: settings.s3Endpoint,
    region: settings.s3Region,
    forcePathStyle: settings.s3ForcePathStyle,
    ...(s3Ca ? { ca: s3Ca } : {}),
    ...(accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey } } : {}),
  });
}
