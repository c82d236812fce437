import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { Limits } from '@space/protocol';
import { type FileEntry, isSpaceApiError, type SessionHandle } from '@space/sdk';
import { toConnectError } from '../errors.js';
import { type EntryInfoSchema, FileType, type Filesystem, type WatchDirResponseSchema } from '../gen/filesystem_pb.js';
import { keepaliveMs, withKeepalives } from './keepalive.js';
import { filesystemEvent } from './filesystem-events.js';
import type { PollingWatchers } from './polling-watchers.js';
import type { SpaceFor } from './sandbox-access.js';
import { asConnectErrors, rpcCaller, rpcSandbox } from './rpc-sandbox.js';

const fileTypes = { file: FileType.FILE, directory: FileType.DIRECTORY, symlink: FileType.SYMLINK, other: FileType.UNSPECIFIED } as const;

/** `drwxr-xr-x` from a mode's permission bits and the entry's type. */
function permissions(entry: FileEntry): string {
  const kind = entry.type === 'directory' ? 'd' : entry.type === 'symlink' ? 'l' : '-';
  const bits = [0o400, 0o200, 0o100, 0o40, 0o20, 0o10, 0o4, 0o2, 0o1].map((bit, i) => (entry.mode & bit ? 'rwx'[i % 3] : '-'));
  return kind + bits.join('');
}

export function entryInfo(entry: FileEntry): MessageInitShape<typeof EntryInfoSchema> {
  return {
    name: entry.name,
    type: fileTypes[entry.type],
    path: entry.path,
    size: BigInt(entry.size),
    mode: entry.mode & 0o7777,
    permissions: permissions(entry),
    owner: '',
    group: '',
    modifiedTime: timestampFromDate(new Date(entry.mtime)),
    ...(entry.target !== undefined ? { symlinkTarget: entry.target } : {}),
  };
}

/** Entries under `dir` down to `depth` levels (envd's ListDir), at most the API's list bound in all. */
async function listDeep(sandbox: SessionHandle, dir: string, depth: number): Promise<FileEntry[]> {
  const found: FileEntry[] = [];
  let level = [dir];
  for (let d = 0; d < depth && level.length > 0; d++) {
    const next: string[] = [];
    for (const at of level) {
      for (const entry of await sandbox.files.list(at)) {
        if (found.length >= Limits.maxListEntries) return found;
        found.push(entry);
        if (entry.type === 'directory') next.push(entry.path);
      }
    }
    level = next;
  }
  return found;
}

/** envd's `filesystem.Filesystem` over SPACE's file operations, on the session the request names (polling watchers held by `watchers`). */
export function filesystemService(spaceFor: SpaceFor, watchers: PollingWatchers): ServiceImpl<typeof Filesystem> {
  const guarded = <T>(ctx: HandlerContext, work: (sandbox: SessionHandle) => Promise<T>): Promise<T> => asConnectErrors(() => work(rpcSandbox(ctx, spaceFor)));
  return {
    stat: (req, ctx) => guarded(ctx, async (sandbox) => ({ entry: entryInfo(await sandbox.files.stat(req.path)) })),

    makeDir: (req, ctx) =>
      guarded(ctx, async (sandbox) => {
        const existing = await sandbox.files.stat(req.path).catch((err) => {
          if (isSpaceApiError(err, 'FILE_NOT_FOUND')) return null;
          throw err;
        });
        if (existing) throw new ConnectError(`FILE_EXISTS: ${req.path} already exists`, Code.AlreadyExists);
        await sandbox.files.mkdir(req.path);
        return { entry: entryInfo(await sandbox.files.stat(req.path)) };
      }),

    move: (req, ctx) =>
      guarded(ctx, async (sandbox) => {
        await sandbox.files.move(req.source, req.destination, { overwrite: true });
        return { entry: entryInfo(await sandbox.files.stat(req.destination)) };
      }),

    listDir: (req, ctx) =>
      guarded(ctx, async (sandbox) => ({ entries: (await listDeep(sandbox, req.path, Math.min(Math.max(req.depth, 1), 32))).map(entryInfo) })),

    remove: (req, ctx) =>
      guarded(ctx, async (sandbox) => {
        await sandbox.files.remove(req.path, { recursive: true });
        return {};
      }),

    async *watchDir(req, ctx): AsyncGenerator<MessageInitShape<typeof WatchDirResponseSchema>> {
      const watch = await guarded(ctx, async (sandbox) => {
        const w = sandbox.files.watch(req.path);
        await w.ready;
        return w;
      });
      try {
        yield { event: { case: 'start', value: {} } };
        for await (const change of withKeepalives(watch, keepaliveMs(ctx.requestHeader), () => 'keepalive' as const, ctx.signal)) {
          if (change === 'keepalive') {
            yield { event: { case: 'keepalive', value: {} } };
            continue;
          }
          const event = await guarded(ctx, (sandbox) => filesystemEvent(sandbox, req.path, change, req.recursive));
          if (event) yield { event: { case: 'filesystem', value: event } };
        }
      } catch (err) {
        throw toConnectError(err);
      } finally {
        watch.close();
      }
    },

    createWatcher: (req, ctx) =>
      guarded(ctx, async (sandbox) => ({ watcherId: await watchers.create(sandbox, rpcCaller(ctx).token, req.path, req.recursive) })),

    getWatcherEvents: (req, ctx) => guarded(ctx, async () => ({ events: watchers.take(req.watcherId, rpcCaller(ctx).sessionId, rpcCaller(ctx).token) })),

    removeWatcher: (req, ctx) =>
      guarded(ctx, async () => {
        watchers.remove(req.watcherId, rpcCaller(ctx).sessionId, rpcCaller(ctx).token);
        return {};
      }),
  };
}
