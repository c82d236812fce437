import type { CheckpointKind, NodeCheckpoint } from '@space/protocol';
import type { KeyedQueue } from '@space/server-kit';
import type { SandboxManager } from './sandbox-manager.js';
import type { CheckpointStore } from './storage/checkpoint-store.js';

/** How long this process remembers when it took a checkpoint (the snapshot's own times can be its source's). */
const rememberTakenMs = 10 * 60_000;

/** Takes, restores and deletes a session's checkpoints on this node. */
export class CheckpointService {
  /** Checkpoints being taken now: never listed, so no sweep can take them for orphans. */
  private readonly inFlight = new Set<string>();
  private readonly taken = new Map<string, number>();

  constructor(
    private readonly manager: SandboxManager,
    private readonly store: CheckpointStore,
    /** The node's per-session queue, shared with the manager: a checkpoint, a restore and a start of one session never overlap. */
    private readonly sessionQueue: KeyedQueue,
  ) {}

  /**
   * Flushes the running sandbox's writes (gVisor caches file data in the Sentry until synced),
   * then snapshots the volume: the checkpoint never holds a torn file the sandbox already wrote.
   * A full checkpoint also saves memory and processes, with the snapshot taken while the sandbox is
   * stopped so both match; anything half-written is removed if it fails.
   */
  async take(sessionId: string, checkpointId: string, kind: CheckpointKind): Promise<NodeCheckpoint> {
    this.inFlight.add(checkpointId);
    try {
      return await this.sessionQueue.run(sessionId, () => this.takeNow(sessionId, checkpointId, kind));
    } finally {
      this.inFlight.delete(checkpointId);
      this.taken.set(checkpointId, Date.now());
    }
  }

  private async takeNow(sessionId: string, checkpointId: string, kind: CheckpointKind): Promise<NodeCheckpoint> {
    await this.manager.flushWrites(sessionId);
    const volume = this.manager.volumePath(sessionId);
    if (kind === 'fs') {
      await this.store.take(volume, checkpointId);
      return { checkpointId, kind, createdAt: new Date().toISOString(), sizeBytes: null, pauseMs: null };
    }
    try {
      const saved = await this.manager.checkpointMemory(sessionId, this.store.partialImageDir(checkpointId), () => this.store.take(volume, checkpointId));
      const meta = await this.store.commitImage(checkpointId, saved.meta);
      return { checkpointId, kind, createdAt: new Date().toISOString(), sizeBytes: meta.sizeBytes, pauseMs: saved.pauseMs };
    } catch (err) {
      await this.store.delete(checkpointId);
      throw err;
    }
  }

  /**
   * Stops the session's sandbox and makes its volume a writable copy of the checkpoint; from a full
   * checkpoint, the next sandbox also starts from its memory, so its processes continue.
   */
  restore(sessionId: string, checkpointId: string): Promise<void> {
    return this.sessionQueue.run(sessionId, async () => {
      const live = this.manager.liveFor(sessionId);
      if (live) await this.manager.stop(live.record.sandboxId);
      const newSession = !this.manager.volumeExists(sessionId);
      await this.store.materialize(checkpointId, this.manager.volumePath(sessionId));
      await this.manager.setPendingMemory(sessionId, (await this.store.image(checkpointId)) ? checkpointId : null, newSession);
    });
  }

  /** Whether the session's volume was written since the checkpoint (the sandbox's cached writes flushed first). */
  changedSince(sessionId: string, checkpointId: string): Promise<boolean> {
    return this.sessionQueue.run(sessionId, async () => {
      await this.manager.flushWrites(sessionId);
      return this.store.changedSince(this.manager.volumePath(sessionId), checkpointId);
    });
  }

  /** The checkpoints on this node, except those being taken; recent ones dated by when this process took them. */
  async list(): Promise<{ id: string; createdAt: string }[]> {
    for (const [id, at] of this.taken) if (Date.now() - at > rememberTakenMs) this.taken.delete(id);
    return (await this.store.list())
      .filter((c) => !this.inFlight.has(c.id))
      .map((c) => {
        const at = this.taken.get(c.id);
        return at ? { id: c.id, createdAt: new Date(at).toISOString() } : c;
      });
  }

  delete(checkpointId: string): Promise<void> {
    return this.store.delete(checkpointId);
  }
}
