import { ErrorCode, SpaceError } from '@space/protocol';
import type { Logger } from './logger.js';

export interface NodeFenceDeps {
  /** The sandboxes serving sessions now. */
  sandboxIds: () => string[];
  pause: (sandboxId: string) => Promise<void>;
  resume: (sandboxId: string) => Promise<void>;
  /** The gateway refuses (and cuts) every sandbox's traffic while fenced: no egress, no secret injected. */
  gateway: { setFenced: (fenced: boolean) => void } | null;
  log: Logger;
}

/**
 * What a cluster node does when no control plane has acknowledged its heartbeat for
 * `SPACE_NODE_FENCE_AFTER_SEC`: the control planes may soon find it lost and start its sessions
 * elsewhere, so its own copies stop acting first. Every sandbox is paused (`runsc pause`: nothing
 * runs, nothing is written), the gateway refuses their traffic, and the node API refuses calls.
 * `fence` is called again while cut off, so a sandbox started by a call already under way is paused
 * too; `lift` resumes what it paused, once a control plane hears the node again and the sessions
 * that moved away were stopped.
 */
export class NodeFence {
  private since: number | null = null;
  private readonly paused = new Set<string>();

  constructor(private readonly deps: NodeFenceDeps) {}

  get fenced(): boolean {
    return this.since !== null;
  }

  /** Since when the node has been fenced (ISO time), or null. */
  get fencedSince(): string | null {
    return this.since === null ? null : new Date(this.since).toISOString();
  }

  async fence(): Promise<void> {
    if (this.since === null) {
      this.since = Date.now();
      this.deps.gateway?.setFenced(true);
    }
    const fresh = this.deps.sandboxIds().filter((id) => !this.paused.has(id));
    if (fresh.length === 0) return;
    const started = performance.now();
    await Promise.all(
      fresh.map(async (id) => {
        this.paused.add(id);
        await this.deps.pause(id).catch((err: Error) => this.deps.log.warn(`fence: pausing sandbox ${id}: ${err.message}`));
      }),
    );
    this.deps.log.warn(
      `fenced: paused ${fresh.length} sandbox(es) in ${Math.round(performance.now() - started)} ms; their egress is refused until a control plane hears this node`,
    );
  }

  async lift(): Promise<void> {
    if (this.since === null) return;
    const live = new Set(this.deps.sandboxIds());
    const resumed = [...this.paused].filter((id) => live.has(id));
    await Promise.all(
      resumed.map((id) => this.deps.resume(id).catch((err: Error) => this.deps.log.warn(`fence lifted: resuming sandbox ${id}: ${err.message}`))),
    );
    this.paused.clear();
    this.deps.gateway?.setFenced(false);
    this.deps.log.info(`fence lifted after ${((Date.now() - this.since) / 1000).toFixed(1)} s: resumed ${resumed.length} sandbox(es)`);
    this.since = null;
  }

  /** Throws while fenced: a call that reaches a cut-off node is not carried out there. */
  refuseIfFenced(): void {
    if (this.since !== null)
      throw new SpaceError(
        ErrorCode.NODE_UNAVAILABLE,
        `this node is fenced (for ${((Date.now() - this.since) / 1000).toFixed(1)} s): no control plane acknowledged its heartbeat within SPACE_NODE_FENCE_AFTER_SEC, so its sandboxes are paused until one does`,
      );
  }
}
