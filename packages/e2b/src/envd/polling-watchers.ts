import { randomBytes } from 'node:crypto';
import { Code, ConnectError } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { FileWatch, SessionHandle } from '@space/sdk';
import { secretsEqual } from '@space/server-kit';
import type { FilesystemEventSchema } from '../gen/filesystem_pb.js';
import { filesystemEvent } from './filesystem-events.js';

type FilesystemEvent = MessageInitShape<typeof FilesystemEventSchema>;

/** Bounds: a client that stops polling, or watches a busy tree, cannot hold memory. */
const limits = { perSession: 16, total: 1024, bufferedEvents: 1024, idleMs: 60_000 };

interface Watcher {
  sessionId: string;
  token: string;
  watch: FileWatch;
  events: FilesystemEvent[];
  lastPolledAt: number;
  /** The watch ended (its sandbox stopped): what is buffered is handed out, then the watcher is gone. */
  ended: boolean;
}

/**
 * envd's polling watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher; E2B's Python SDK uses
 * them): a watch held by this control plane, its events buffered until polled. They live in this
 * process, so a poll must reach the control plane that created the watcher (with several, route a
 * client to one); one not polled for a minute is removed.
 */
export class PollingWatchers {
  private readonly watchers = new Map<string, Watcher>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly now: () => number = Date.now) {
    this.sweeper = setInterval(() => this.sweep(), 10_000);
    this.sweeper.unref();
  }

  async create(sandbox: SessionHandle, token: string, path: string, recursive: boolean): Promise<string> {
    if (this.watchers.size >= limits.total) throw new ConnectError('too many watchers on this control plane; remove some', Code.ResourceExhausted);
    if ([...this.watchers.values()].filter((w) => w.sessionId === sandbox.id).length >= limits.perSession)
      throw new ConnectError(`a sandbox may have ${limits.perSession} watchers; remove some`, Code.ResourceExhausted);
    const watch = sandbox.files.watch(path);
    await watch.ready;
    const id = `w_${randomBytes(12).toString('hex')}`;
    const watcher: Watcher = { sessionId: sandbox.id, token, watch, events: [], lastPolledAt: this.now(), ended: false };
    this.watchers.set(id, watcher);
    void (async () => {
      try {
        for await (const change of watch) {
          const event = await filesystemEvent(sandbox, path, change, recursive);
          if (!event) continue;
          if (watcher.events.length >= limits.bufferedEvents) watcher.events.shift();
          watcher.events.push(event);
        }
      } catch {
        // the watch broke: as if it ended
      }
      watcher.ended = true;
      watcher.watch.close();
    })();
    return id;
  }

  /** The events since the last poll; only for the session and token that created the watcher. */
  take(id: string, sessionId: string, token: string): FilesystemEvent[] {
    const watcher = this.owned(id, sessionId, token);
    watcher.lastPolledAt = this.now();
    if (watcher.ended && watcher.events.length === 0) {
      this.watchers.delete(id);
      throw new ConnectError(`watcher ${id} ended: its sandbox stopped`, Code.NotFound);
    }
    return watcher.events.splice(0);
  }

  remove(id: string, sessionId: string, token: string): void {
    this.owned(id, sessionId, token).watch.close();
    this.watchers.delete(id);
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const watcher of this.watchers.values()) watcher.watch.close();
    this.watchers.clear();
  }

  private owned(id: string, sessionId: string, token: string): Watcher {
    const watcher = this.watchers.get(id);
    if (!watcher || watcher.sessionId !== sessionId || !secretsEqual(watcher.token, token))
      throw new ConnectError(`no watcher ${id} on this control plane (removed, idle for a minute, or created through another)`, Code.NotFound);
    return watcher;
  }

  private sweep(): void {
    for (const [id, watcher] of this.watchers) {
      if (this.now() - watcher.lastPolledAt < limits.idleMs) continue;
      watcher.watch.close();
      this.watchers.delete(id);
    }
  }
}
