import { createHash } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { type DiffEntry, ErrorCode, type FileList, type FileStat, Limits, type NodePathVersionsSchema, SpaceError } from '@space/protocol';
import type { z } from 'zod';
import { diffSnapshots } from './checkpoint-diff.js';
import { fileTypeOf } from './file-types.js';

type NodePathVersion = z.infer<typeof NodePathVersionsSchema>['versions'][number];

/** How many symlinks one path may pass through, as Linux allows (ELOOP past it). */
const maxLinks = 40;

/** A file larger than this is listed in a history by size and time, without a hash (reading it whole per checkpoint would be a disk scan). */
export const maxHashedFileBytes = 256 * 1024 * 1024;

/** A path resolved inside a checkpoint: where it is on the host, and what the sandbox would call it. */
interface Resolved {
  hostPath: string;
  sandboxPath: string;
  stats: Stats;
}

const isoTime = (ms: number) => new Date(ms).toISOString();

function describe(sandboxPath: string, stats: Stats, target?: string): FileStat {
  return {
    path: sandboxPath,
    name: path.posix.basename(sandboxPath) || '/',
    type: fileTypeOf(stats),
    size: stats.size,
    mode: stats.mode & 0o7777,
    mtime: isoTime(stats.mtimeMs),
    ...(target === undefined ? {} : { target: target.slice(0, Limits.maxPathLength) }),
  };
}

/**
 * A checkpoint's files, read from the host without a sandbox. A checkpoint holds what the session
 * wrote, so it is hostile: a path is resolved as the sandbox would resolve it, but inside the
 * checkpoint (a symlink's absolute target starts again at the checkpoint's root, `..` stops there),
 * one component at a time with lstat, so nothing outside it is ever reached; only directories and
 * regular files are opened (O_NOFOLLOW), never a device, FIFO or socket. A checkpoint is a
 * read-only snapshot: nothing changes it between these checks and the reads.
 */
export class CheckpointFiles {
  /** `root(id)`: where checkpoint `id`'s snapshot (the sandbox's root filesystem) is on this node, or null when it is not. */
  constructor(private readonly root: (checkpointId: string) => Promise<string | null>) {}

  /** The path's stat; a final symlink is described, not followed (as the sandbox's files API does). */
  async stat(checkpointId: string, sandboxPath: string): Promise<FileStat> {
    const found = await this.resolve(checkpointId, sandboxPath, false);
    return describe(found.sandboxPath, found.stats, found.stats.isSymbolicLink() ? await readlink(found.hostPath) : undefined);
  }

  /** A directory's entries, sorted by name, at most `Limits.maxListEntries`. */
  async list(checkpointId: string, sandboxPath: string): Promise<FileList> {
    const dir = await this.resolve(checkpointId, sandboxPath, true);
    if (!dir.stats.isDirectory()) throw new SpaceError(ErrorCode.NOT_A_DIRECTORY, `${JSON.stringify(sandboxPath)} is not a directory`);
    const names = (await readdir(dir.hostPath)).sort();
    const entries: FileStat[] = [];
    for (const name of names.slice(0, Limits.maxListEntries)) {
      const at = path.join(dir.hostPath, name);
      const entry = path.posix.join(dir.sandboxPath, name);
      // A name that is not UTF-8 comes back altered and is not found again: listed as what it is to us, not an error of the whole list.
      const stats = await lstat(at).catch(() => null);
      if (!stats) entries.push({ path: entry, name, type: 'other', size: 0, mode: 0, mtime: isoTime(0) });
      else entries.push(describe(entry, stats, stats.isSymbolicLink() ? await readlink(at) : undefined));
    }
    return { path: dir.sandboxPath, entries, truncated: names.length > Limits.maxListEntries };
  }

  /** A regular file's bytes as a stream, with its size; a final symlink is followed inside the checkpoint. */
  async read(checkpointId: string, sandboxPath: string): Promise<{ stream: Readable; size: number }> {
    const file = await this.resolve(checkpointId, sandboxPath, true);
    if (file.stats.isDirectory()) throw new SpaceError(ErrorCode.IS_A_DIRECTORY, `${JSON.stringify(sandboxPath)} is a directory; list it with /files/list`);
    if (!file.stats.isFile()) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `${JSON.stringify(sandboxPath)} is not a regular file`);
    // O_NOFOLLOW and O_NONBLOCK: never a link, and never a wait on something that is not a file.
    const handle = await open(file.hostPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    return { stream: handle.createReadStream(), size: file.stats.size };
  }

  /** The path in each of the checkpoints held here (its stat, null when missing, and a regular file's sha256 within the bound); one not here is left out. */
  async versions(checkpointIds: string[], sandboxPath: string): Promise<NodePathVersion[]> {
    const versions: NodePathVersion[] = [];
    // A file no one touched between two checkpoints is the same inode with the same change time in
    // both snapshots (nothing in a sandbox sets a host file's ctime): hashed once, not per checkpoint.
    const hashes = new Map<string, string>();
    for (const id of checkpointIds) {
      const found = await this.resolve(id, sandboxPath, false).catch((err: unknown) => {
        if (err instanceof SpaceError && (err.code === ErrorCode.FILE_NOT_FOUND || err.code === ErrorCode.NOT_A_DIRECTORY)) return null;
        if (err instanceof SpaceError && err.code === ErrorCode.CHECKPOINT_NOT_FOUND) return undefined;
        throw err;
      });
      // Not on this node (deleted meanwhile): left out, for the caller to tell.
      if (found === undefined) continue;
      if (found === null) {
        versions.push({ checkpointId: id, stat: null, sha256: null });
        continue;
      }
      const target = found.stats.isSymbolicLink() ? await readlink(found.hostPath) : undefined;
      let sha256: string | null = null;
      if (found.stats.isFile() && found.stats.size <= maxHashedFileBytes) {
        const unchanged = `${found.stats.ino}:${found.stats.ctimeMs}:${found.stats.size}`;
        sha256 = hashes.get(unchanged) ?? (await this.sha256(found.hostPath));
        hashes.set(unchanged, sha256);
      }
      versions.push({ checkpointId: id, stat: describe(found.sandboxPath, found.stats, target), sha256 });
    }
    return versions;
  }

  /**
   * One page of what differs from checkpoint `fromId` to `toId` (both on this node): the paths after
   * `after`, at most `limit`, and the `after` of the next page (null on the last). Each page is
   * worked out again from btrfs (`diffSnapshots`): nothing is kept between calls.
   */
  async diff(fromId: string, toId: string, after: string | undefined, limit: number): Promise<{ entries: DiffEntry[]; next: string | null }> {
    const [from, to] = [await this.root(fromId), await this.root(toId)];
    for (const [id, root] of [[fromId, from] as const, [toId, to] as const])
      if (!root) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${id} is not on this node`);
    const all = await diffSnapshots(from!, to!);
    const rest = after === undefined ? all : all.filter((e) => e.path > after);
    const entries = rest.slice(0, limit);
    return { entries, next: rest.length > limit ? entries.at(-1)!.path : null };
  }

  private async sha256(hostPath: string): Promise<string> {
    const handle = await open(hostPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const hash = createHash('sha256');
    for await (const chunk of handle.createReadStream()) hash.update(chunk as Buffer);
    return hash.digest('hex');
  }

  /**
   * Resolves `sandboxPath` (absolute) inside the checkpoint, component by component: each symlink on
   * the way (and the last one when `followLast`) is replaced by its target, an absolute target taken
   * from the checkpoint's root, and `..` never climbs above that root.
   */
  private async resolve(checkpointId: string, sandboxPath: string, followLast: boolean): Promise<Resolved> {
    const root = await this.root(checkpointId);
    if (!root) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${checkpointId} is not on this node`);
    const missing = () => new SpaceError(ErrorCode.FILE_NOT_FOUND, `${JSON.stringify(sandboxPath)} is not in checkpoint ${checkpointId}`);
    const within: string[] = [];
    let todo = sandboxPath.split('/').filter((p) => p !== '' && p !== '.');
    let links = 0;
    let stats = await lstat(root);
    while (todo.length > 0) {
      const [part, ...rest] = todo as [string, ...string[]];
      todo = rest;
      if (part === '..') {
        within.pop();
        stats = await lstat(path.join(root, ...within));
        continue;
      }
      if (!stats.isDirectory()) throw new SpaceError(ErrorCode.NOT_A_DIRECTORY, `${JSON.stringify(sandboxPath)}: /${within.join('/')} is not a directory`);
      const at = path.join(root, ...within, part);
      const found = await lstat(at).catch(() => null);
      if (!found) throw missing();
      if (found.isSymbolicLink() && (todo.length > 0 || followLast)) {
        if (++links > maxLinks)
          throw new SpaceError(ErrorCode.VALIDATION_FAILED, `${JSON.stringify(sandboxPath)} passes through more than ${maxLinks} symbolic links`);
        const target = await readlink(at);
        if (target.startsWith('/')) {
          within.length = 0;
          stats = await lstat(root);
        }
        todo = [...target.split('/').filter((p) => p !== '' && p !== '.'), ...todo];
        continue;
      }
      within.push(part);
      stats = found;
    }
    return { hostPath: path.join(root, ...within), sandboxPath: `/${within.join('/')}`, stats };
  }
}
