import { ExecResultSchema } from '@space/protocol';
import type { SandboxManager } from './sandbox-manager.js';
import type { CheckpointStore } from './storage/checkpoint-store.js';

/** Takes, restores and deletes a session's filesystem checkpoints on this node. */
export class CheckpointService {
  constructor(
    private readonly manager: SandboxManager,
    private readonly store: CheckpointStore,
  ) {}

  /**
   * Flushes the running sandbox's writes (gVisor caches file data in the Sentry until synced),
   * then snapshots the volume: the checkpoint never holds a torn file the sandbox already wrote.
   */
  async take(sessionId: string, checkpointId: string): Promise<{ checkpointId: string; createdAt: string }> {
    const live = this.manager.liveFor(sessionId);
    if (live) await live.daemon.json('POST', '/exec', { cmd: ['sync'], timeoutMs: 30_000 }, ExecResultSchema, { timeoutMs: 35_000 });
    await this.store.take(this.manager.volumePath(sessionId), checkpointId);
    return { checkpointId, createdAt: new Date().toISOString() };
  }

  /** Stops the session's sandbox and makes its volume a writable copy of the checkpoint. */
  async restore(sessionId: string, checkpointId: string): Promise<void> {
    const live = this.manager.liveFor(sessionId);
    if (live) await this.manager.stop(live.record.sandboxId);
    await this.store.materialize(checkpointId, this.manager.volumePath(sessionId));
  }

  list(): Promise<string[]> {
    return this.store.list();
  }

  delete(checkpointId: string): Promise<void> {
    return this.store.delete(checkpointId);
  }
}
