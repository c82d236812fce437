import path from 'node:path';
import { ErrorCode, SpaceError, type CheckpointKind, type NodeCheckpoint } from '@space/protocol';
import type { KeyedQueue } from '@space/server-kit';
import type { Logger } from './logger.js';
import { PhaseTimer } from './sandbox/phase-timer.js';
import type { SandboxManager } from './sandbox/sandbox-manager.js';
import type { SandboxMemory } from './sandbox/sandbox-memory.js';
import type { PendingStart, SessionVolumes } from './sandbox/session-volumes.js';
import type { BtrfsVolume } from './storage/btrfs-volume.js';
import type { CheckpointStore } from './storage/checkpoint-store.js';
import type { HostDiskWatch } from './storage/host-disk.js';
import { type ImageStaging, imageBytesEstimate } from './storage/image-staging.js';
import type { NamedVolumes } from './storage/named-volumes.js';
import { pathExists } from './storage/path-exists.js';

/** How long this process remembers when it took a checkpoint (the snapshot's own times can be its source's). */
const rememberTakenMs = 10 * 60_000;

export interface NodeCheckpointServiceDeps {
  manager: SandboxManager;
  /** A full checkpoint's pause: the running sandbox's memory saved, then the sandbox running on. */
  memory: SandboxMemory;
  volumes: SessionVolumes;
  store: CheckpointStore;
  namedVolumes: Pick<NamedVolumes, 'path'>;
  /** Host memory a memory image is written to while its sandbox is paused, then moved to the volume. */
  staging: Pick<ImageStaging, 'reserve'>;
  /** The node's volume: an image that is not staged is written past its writeback bound (the sandbox is paused meanwhile). */
  writeback: Pick<BtrfsVolume, 'unbounded'>;
  /** Full checkpoints (their memory images are the node's biggest writes) are refused while the host disk is below its reserve. */
  hostDisk: Pick<HostDiskWatch, 'refuseIfLow'>;
  /** The node's per-session queue, shared with the manager: a checkpoint, a restore and a start of one session never overlap. */
  sessionQueue: KeyedQueue;
  /** The daemon build running now: a memory image taken with another cannot be restored. */
  runtimeDir: string;
  log: Logger;
}

/** The node's side of checkpoints: takes, restores and deletes a session's checkpoints on this node. */
export class NodeCheckpointService {
  /** Checkpoints being taken now: never listed, so no sweep can take them for orphans. */
  private readonly inFlight = new Set<string>();
  private readonly taken = new Map<string, number>();

  constructor(private readonly deps: NodeCheckpointServiceDeps) {}

  /**
   * Flushes the running sandbox's writes (gVisor caches file data in the Sentry until synced),
   * then snapshots the volume: the checkpoint never holds a torn file the sandbox already wrote.
   * A full checkpoint also saves memory and processes; anything half-written is removed if it fails.
   * `volumes`: the session's read-write volumes, copied with the snapshot (for a full checkpoint in
   * the same pause, so they match its memory too).
   */
  async take(sessionId: string, checkpointId: string, kind: CheckpointKind, volumes: string[] = []): Promise<NodeCheckpoint> {
    // The control plane takes an fs checkpoint instead: the files are safe either way.
    if (kind === 'full') this.deps.hostDisk.refuseIfLow('a full checkpoint', ErrorCode.FULL_CHECKPOINT_REFUSED);
    const volumePaths = new Map(volumes.map((volumeId) => [volumeId, this.deps.namedVolumes.path(volumeId)]));
    this.inFlight.add(checkpointId);
    try {
      return await this.deps.sessionQueue.run(sessionId, async () => {
        // Stamped before the flush: every write acknowledged before `createdAt` is in the checkpoint.
        const createdAt = new Date().toISOString();
        const phases = new PhaseTimer();
        // Nothing under way and no process to write before the flush (checked first: one could write and end in between).
        const live = kind === 'fs' ? this.deps.manager.forSession(sessionId) : undefined;
        const mark = live?.entries.mark() ?? null;
        const quiet = live !== undefined && mark !== null && !(await this.deps.manager.runsProcesses(live));
        if (mark !== null) phases.mark('processes');
        await this.deps.manager.flushWrites(sessionId);
        phases.mark('sync');
        if (kind === 'fs') {
          try {
            await this.deps.store.take(this.deps.volumes.path(sessionId), checkpointId);
            await this.deps.store.copyVolumes(checkpointId, volumePaths);
          } catch (err) {
            await this.deps.store.delete(checkpointId);
            throw err;
          }
          phases.mark('snapshot');
          // Nothing came in since either: nothing writes the volume after this checkpoint until something does.
          if (quiet) live.entries.quietAfter(checkpointId, mark);
          this.deps.log.info(`fs checkpoint ${checkpointId} of ${sessionId} in ${phases.summary()}`);
          return { checkpointId, kind, createdAt, sizeBytes: null, pauseMs: null };
        }
        return await this.takeFull(sessionId, checkpointId, createdAt, volumePaths, phases);
      });
    } finally {
      this.inFlight.delete(checkpointId);
      this.taken.set(checkpointId, Date.now());
    }
  }

  /**
   * Save memory (the sandbox is paused, not stopped), snapshot the volume while nothing runs so files
   * and memory match, let the sandbox run on, publish the image. The image is written to host memory
   * when it fits there (the pause lasts as long as the write) and moved to the volume afterwards.
   */
  private async takeFull(
    sessionId: string,
    checkpointId: string,
    createdAt: string,
    volumePaths: Map<string, string>,
    phases: PhaseTimer,
  ): Promise<NodeCheckpoint> {
    const { memory, store } = this.deps;
    const sandboxBytes = await memory.memoryBytes(sessionId);
    const staged = sandboxBytes === null ? null : await this.deps.staging.reserve(checkpointId, sandboxBytes);
    let restoreBackstop: (() => Promise<void>) | null = null;
    try {
      if (sandboxBytes !== null) restoreBackstop = await memory.allowImageMemory(sessionId, imageBytesEstimate(sandboxBytes));
      const saved = staged
        ? await memory.saveMemory(sessionId, staged.dir)
        : await this.deps.writeback.unbounded(() => memory.saveMemory(sessionId, store.partialImageDir(checkpointId)));
      phases.mark('memory saved');
      const snapshot = async (): Promise<void> => {
        await store.take(this.deps.volumes.path(sessionId), checkpointId);
        await store.copyVolumes(checkpointId, volumePaths);
      };
      const snapshotError = await snapshot().then(
        () => null,
        (err: unknown) => err,
      );
      phases.mark('snapshot');
      const { meta, pauseMs } = await memory.runOn(saved);
      phases.mark('resumed');
      if (snapshotError) throw snapshotError;
      await staged?.moveTo(store.partialImageDir(checkpointId));
      const image = await store.commitImage(checkpointId, meta);
      phases.mark('image stored');
      return { checkpointId, kind: 'full', createdAt, sizeBytes: image.sizeBytes, pauseMs };
    } catch (err) {
      await store.delete(checkpointId);
      throw err;
    } finally {
      await staged?.release();
      await restoreBackstop?.();
    }
  }

  /**
   * Stops the session's sandbox and makes its volume a writable copy of the checkpoint; from a full
   * checkpoint, the session's next sandbox also starts from its memory, so its processes continue.
   */
  restore(sessionId: string, checkpointId: string): Promise<void> {
    const { manager, volumes, store } = this.deps;
    return this.deps.sessionQueue.run(sessionId, async () => {
      const live = manager.forSession(sessionId);
      if (live) await manager.stop(live.record.sandboxId);
      const newSession = !(await volumes.exists(sessionId));
      if (newSession) this.deps.hostDisk.refuseIfLow('a new session (a fork)');
      await store.materialize(checkpointId, volumes.path(sessionId));
      await volumes.setPendingStart(sessionId, await this.pendingStartOf(checkpointId, newSession));
    });
  }

  /** Whether the session's volume was written since the checkpoint (the sandbox's cached writes flushed first). */
  changedSince(sessionId: string, checkpointId: string): Promise<boolean> {
    return this.deps.sessionQueue.run(sessionId, async () => {
      await this.deps.manager.flushWrites(sessionId);
      return this.deps.store.changedSince(this.deps.volumes.path(sessionId), checkpointId);
    });
  }

  /** The checkpoints on this node, except those being taken; recent ones dated by when this process took them. */
  async list(): Promise<{ id: string; createdAt: string }[]> {
    for (const [id, at] of this.taken) if (Date.now() - at > rememberTakenMs) this.taken.delete(id);
    return (await this.deps.store.list())
      .filter((c) => !this.inFlight.has(c.id))
      .map((c) => {
        const at = this.taken.get(c.id);
        return at ? { id: c.id, createdAt: new Date(at).toISOString() } : c;
      });
  }

  delete(checkpointId: string): Promise<void> {
    return this.deps.store.delete(checkpointId);
  }

  /** The checkpoint's read-only snapshot, to make something of (a template). */
  async snapshotOf(checkpointId: string): Promise<string> {
    const dir = this.deps.store.path(checkpointId);
    if (!(await pathExists(dir))) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${checkpointId} is not on this node`);
    return dir;
  }

  /**
   * How the session's next sandbox starts from the checkpoint, checked here once: null for an fs
   * checkpoint (a boot on its files); its memory image; or, for an image saved by another agent build
   * or runsc version (after an upgrade: such images are never restored), a boot on its files with a
   * note saying so, which the session's history shows. `newSession`: the memory is another session's (a fork).
   */
  private async pendingStartOf(checkpointId: string, newSession: boolean): Promise<PendingStart | null> {
    const image = await this.deps.store.image(checkpointId);
    if (!image) return null;
    // The directory's name is the hash of what it holds; its path differs between nodes whose data directories do.
    if (path.basename(image.meta.runtimeDir) !== path.basename(this.deps.runtimeDir)) {
      const note = `the memory image of ${checkpointId} was saved by another agent build or runsc version and is not restored; the sandbox booted on the checkpoint's files, its processes did not continue`;
      this.deps.log.warn(note);
      return { note };
    }
    // What a restore needs of the image's metadata: all of it but its size.
    const { sizeBytes, ...meta } = image.meta;
    return { checkpointId, label: `the memory of ${checkpointId}`, dir: image.dir, meta, newSession };
  }
}
