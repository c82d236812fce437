import { createReadStream, createWriteStream } from 'node:fs';
import { cp, lstat, mkdir, readdir, readlink, realpath, rename, rm, rmdir, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ErrorCode, Limits, SpaceError, type FileList, type FileStat } from '@space/protocol';
import { mapFsErrors } from './fs-errors.js';
import type { SandboxPaths } from './sandbox-paths.js';

/** File operations inside the sandbox. Large files are streamed, never held in memory. */
export class FileService {
  constructor(private readonly paths: SandboxPaths) {}

  async stat(requested: string): Promise<FileStat> {
    const abs = this.paths.resolve(requested);
    return mapFsErrors(requested, () => describe(abs));
  }

  async openRead(requested: string): Promise<{ stream: Readable; size: number }> {
    const abs = this.paths.resolve(requested);
    return mapFsErrors(requested, async () => {
      const info = await stat(abs);
      if (info.isDirectory()) throw new SpaceError(ErrorCode.IS_A_DIRECTORY, `${JSON.stringify(requested)} is a directory; list it with /files/list`);
      if (!info.isFile()) throw new SpaceError(ErrorCode.INVALID_PATH, `${JSON.stringify(requested)} is not a regular file`);
      return { stream: createReadStream(abs), size: info.size };
    });
  }

  /** Writes to a temporary file beside the target and renames it into place: readers never see a torn file. */
  async write(requested: string, body: Readable, maxBytes: number): Promise<FileStat> {
    return mapFsErrors(requested, async () => {
      await mkdir(path.dirname(this.paths.resolve(requested)), { recursive: true });
      // Resolve the parent's symlinks first: this gVisor answers stat("<link to />/missing") with the
      // root directory's attributes instead of ENOENT.
      const resolved = this.paths.resolve(requested);
      const abs = path.join(await realpath(path.dirname(resolved)), path.basename(resolved));
      const existing = await stat(abs).catch(() => null);
      if (existing?.isDirectory()) throw new SpaceError(ErrorCode.IS_A_DIRECTORY, `${JSON.stringify(requested)} is a directory`);
      const temp = path.join(path.dirname(abs), `.space-upload-${randomBytes(6).toString('hex')}`);
      let written = 0;
      body.on('data', (chunk: Buffer) => {
        written += chunk.length;
        if (written > maxBytes) body.destroy(new SpaceError(ErrorCode.PAYLOAD_TOO_LARGE, `upload exceeds ${maxBytes} bytes`));
      });
      try {
        await pipeline(body, createWriteStream(temp, { mode: existing ? existing.mode & 0o7777 : 0o644 }));
        await rename(temp, abs);
      } catch (err) {
        await unlink(temp).catch(() => undefined);
        throw err;
      }
      return describe(abs);
    });
  }

  async list(requested: string): Promise<FileList> {
    const abs = this.paths.resolve(requested);
    return mapFsErrors(requested, async () => {
      const names = await readdir(abs);
      names.sort();
      const entries: FileStat[] = [];
      for (const name of names.slice(0, Limits.maxListEntries)) {
        entries.push(await describe(path.join(abs, name)).catch(() => placeholder(path.join(abs, name))));
      }
      return { path: abs, entries, truncated: names.length > Limits.maxListEntries };
    });
  }

  async mkdir(requested: string, { recursive }: { recursive: boolean }): Promise<void> {
    const abs = this.paths.resolve(requested);
    await mapFsErrors(requested, () => mkdir(abs, { recursive }));
  }

  /** Renames; across file systems (EXDEV: /tmp and /workspace may differ) it copies and then removes, like mv. */
  async move(from: string, to: string, { overwrite }: { overwrite: boolean }): Promise<void> {
    const src = this.paths.resolve(from);
    const dst = this.paths.resolve(to);
    if (src === '/') throw new SpaceError(ErrorCode.INVALID_PATH, 'refusing to move /');
    if (dst === src || dst.startsWith(`${src}/`)) throw new SpaceError(ErrorCode.INVALID_PATH, `cannot move ${JSON.stringify(from)} into itself`);
    await mapFsErrors(from, async () => {
      await lstat(src);
      if (!overwrite && (await lstat(dst).catch(() => null)))
        throw new SpaceError(ErrorCode.FILE_EXISTS, `${JSON.stringify(to)} exists; pass overwrite: true to replace it`);
      await mkdir(path.dirname(dst), { recursive: true });
      try {
        await rename(src, dst);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
        if (overwrite) await rm(dst, { recursive: true, force: true });
        await cp(src, dst, { recursive: true, errorOnExist: true, force: false, preserveTimestamps: true, verbatimSymlinks: true });
        await rm(src, { recursive: true });
      }
    });
  }

  async remove(requested: string, { recursive }: { recursive: boolean }): Promise<void> {
    const abs = this.paths.resolve(requested);
    if (abs === '/') throw new SpaceError(ErrorCode.INVALID_PATH, 'refusing to remove /');
    await mapFsErrors(requested, async () => {
      const info = await lstat(abs);
      if (!info.isDirectory()) return unlink(abs);
      return recursive ? rm(abs, { recursive: true }) : rmdir(abs);
    });
  }
}

async function describe(abs: string): Promise<FileStat> {
  const info = await lstat(abs);
  const type = info.isFile() ? 'file' : info.isDirectory() ? 'directory' : info.isSymbolicLink() ? 'symlink' : 'other';
  const result: FileStat = { path: abs, name: path.basename(abs), type, size: info.size, mode: info.mode & 0o7777, mtime: info.mtime.toISOString() };
  if (type === 'symlink') result.target = await readlink(abs);
  return result;
}

function placeholder(abs: string): FileStat {
  return { path: abs, name: path.basename(abs), type: 'other', size: 0, mode: 0, mtime: new Date(0).toISOString() };
}
