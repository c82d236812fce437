import { Readable } from 'node:stream';
import type { CallOptions } from './options.js';
import { q as pathQuery } from './session.js';
import type { Transport } from './transport.js';
import type { FileEntry } from './types.js';

/**
 * A checkpoint's files as they were, read where the checkpoint is: no sandbox starts, and the
 * session may be stopped. Read-only. Relative paths are from the session's working directory; a
 * symlink in the checkpoint resolves inside it, as it would in the sandbox.
 */
export class CheckpointFiles {
  private readonly base: string;

  constructor(
    private readonly t: Transport,
    readonly checkpointId: string,
  ) {
    this.base = `/v1/checkpoints/${encodeURIComponent(checkpointId)}/files`;
  }

  async read(path: string, opts: CallOptions = {}): Promise<Buffer> {
    return Buffer.from(await (await this.t.request('GET', `${this.base}${pathQuery(path)}`, opts)).arrayBuffer());
  }

  /** The file as a Node.js stream. */
  async download(path: string, opts: CallOptions = {}): Promise<Readable> {
    return Readable.fromWeb((await this.t.request('GET', `${this.base}${pathQuery(path)}`, opts)).body as never);
  }

  async list(path: string, opts: CallOptions = {}): Promise<FileEntry[]> {
    return (await this.t.json<{ entries: FileEntry[] }>('GET', `${this.base}/list${pathQuery(path)}`, opts)).entries;
  }

  async stat(path: string, opts: CallOptions = {}): Promise<FileEntry> {
    return this.t.json<FileEntry>('GET', `${this.base}/stat${pathQuery(path)}`, opts);
  }
}
