import { ErrorCode, SpaceError } from '@space/protocol';
import type { EgressGateway } from '../gateway/egress-gateway.js';
import type { Logger } from '../logger.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { imageAddressesOf, type SandboxRecords } from '../sandbox-record.js';
import type { MemoryImageMeta } from '../storage/checkpoint-store.js';
import { callsEnded } from './daemon-calls.js';
import type { DaemonLink } from './daemon-link.js';
import type { LiveSandbox, LiveSandboxes } from './live-sandboxes.js';
import { PhaseTimer } from './phase-timer.js';
import { consoleTail } from './sandbox-booter.js';

export interface SandboxMemoryDeps {
  driver: RuntimeDriver;
  records: SandboxRecords;
  live: LiveSandboxes;
  link: DaemonLink;
  /** The gateway cuts the sandbox's connections out while its memory is saved. */
  egress: Pick<EgressGateway, 'cutSandbox'>;
  /** The daemon build running now, recorded with each image (one taken with another cannot be restored). */
  runtimeDir: string;
  /** Stops a sandbox that cannot run on after its save (the manager's stop: cleaned up like a dead one). */
  stop: (sandboxId: string) => Promise<void>;
  log: Logger;
}

/** A sandbox paused with its memory saved, waiting for its checkpoint's snapshot before it runs on. */
export interface SavedSandbox {
  live: LiveSandbox;
  imageDir: string;
  phases: PhaseTimer;
  /** Lets the calls that waited for the pause through. */
  release: () => void;
}

/**
 * A full checkpoint's part in a running sandbox: its memory saved while it stands paused (calls and
 * preview connections wait), the host memory the image takes allowed for meanwhile, and the sandbox
 * running on after its volume's snapshot. The checkpoint service drives it, in the session's turn.
 */
export class SandboxMemory {
  constructor(private readonly deps: SandboxMemoryDeps) {}

  /** Host memory the session's sandbox takes now (its cgroup); null without a sandbox or a cgroup to read. */
  async memoryBytes(sessionId: string): Promise<number | null> {
    const live = this.deps.live.forSession(sessionId);
    return live ? ((await this.deps.driver.usage(live.record.sandboxId))?.memoryBytes ?? null) : null;
  }

  /**
   * Lets the session's sandbox hold `bytes` more host memory than its backstop while its memory image
   * is written and moved: the Sentry writes the image, so the kernel charges the pages it writes to
   * (host memory when staged, the page cache otherwise) to the sandbox's cgroup, and a sandbox near
   * its limit would be throttled or killed by its own checkpoint. Resolves with what puts it back.
   */
  async allowImageMemory(sessionId: string, bytes: number): Promise<() => Promise<void>> {
    const record = this.deps.live.forSession(sessionId)?.record;
    if (!record?.memoryMb) return async () => undefined;
    const { sandboxId, memoryMb } = record;
    await this.deps.driver.setMemoryBackstop(sandboxId, memoryMb, bytes);
    return async () => {
      if (!this.deps.live.find(sandboxId)) return;
      await this.deps.driver.setMemoryBackstop(sandboxId, memoryMb).catch((err: unknown) => {
        // cgroup v1 refuses a limit below what it holds: the sandbox grew meanwhile; the memory watch still holds it to memoryMb.
        this.deps.log.warn(`sandbox ${sandboxId}: its memory backstop stays raised after its checkpoint: ${(err as Error).message}`);
      });
    };
  }

  /**
   * A full checkpoint's first step: the sandbox's connections with the outside are reset (the
   * node's into it, the gateway's out of it, whose new ones are reset until the save is done), the
   * agent closes its channel, the sandbox is paused, and the runtime saves its memory into
   * `imageDir` leaving it paused (`--leave-running` on a paused sandbox), so the caller snapshots the
   * volume while nothing runs and files and memory match. Calls and preview connections arriving
   * from now on wait until `runOn`. Refused (FULL_CHECKPOINT_REFUSED) before the pause when there is
   * no sandbox, or its agent sees streams attached or connections with the outside still open.
   */
  async saveMemory(sessionId: string, imageDir: string): Promise<SavedSandbox> {
    const live = this.deps.live.forSession(sessionId);
    if (!live) throw new SpaceError(ErrorCode.FULL_CHECKPOINT_REFUSED, 'the session has no running sandbox: there is no memory to save');
    await this.deps.driver.prepareSave(live.record.sandboxId).catch((err: Error) => {
      // Its runtime did not answer (CommandTimeout): nothing was paused; the caller takes an fs checkpoint instead.
      throw new SpaceError(ErrorCode.FULL_CHECKPOINT_FAILED, err.message);
    });
    if (live.pendingCall) await live.pendingCall.catch(() => undefined);
    let release!: () => void;
    live.pendingCall = new Promise<void>((resolve) => (release = resolve));
    let reopenEgress = (): void => undefined;
    const done = (): void => {
      reopenEgress();
      live.pendingCall = null;
      release();
    };
    const phases = new PhaseTimer();
    try {
      // New calls wait now; those already sent are let finish: the agent's quiesce would cut them.
      await callsEnded(live);
      reopenEgress = this.deps.egress.cutSandbox(live.record.sandboxId);
      live.inbound.reset();
      await this.deps.link.quiesce(live.daemon);
      phases.mark('quiesce');
      await this.pauseAndSave(live, imageDir, phases);
      phases.mark('save');
    } catch (err) {
      done();
      throw err;
    }
    return { live, imageDir, phases, release: done };
  }

  /**
   * A full checkpoint's last step: the paused sandbox runs on (it never stopped), its agent listens
   * again, and the calls that waited go through. If it cannot, the checkpoint is still complete;
   * only this sandbox is lost, and the session resumes from the checkpoint on its next call.
   */
  async runOn(saved: SavedSandbox): Promise<{ meta: Omit<MemoryImageMeta, 'sizeBytes'>; pauseMs: number }> {
    const { deps } = this;
    const { live, phases } = saved;
    const { sandboxId } = live.record;
    phases.mark('snapshot');
    try {
      await deps.driver.resume(sandboxId);
      phases.mark('resume');
      await deps.link.wake(sandboxId);
      await deps.link.waitReady(sandboxId, live.daemon);
      phases.mark('agent');
      deps.log.info(`sandbox ${sandboxId} paused ${phases.summary()} for a full checkpoint`);
    } catch (err) {
      deps.log.warn(
        `sandbox ${sandboxId} did not run on after its checkpoint: ${(err as Error).message}; console: ${await consoleTail(deps.records.workDir(sandboxId), 1500)}`,
      );
      await this.deps.stop(sandboxId);
    } finally {
      saved.release();
    }
    return { meta: { token: live.record.token, runtimeDir: deps.runtimeDir, addresses: imageAddressesOf(live.record) }, pauseMs: Math.round(phases.elapsed()) };
  }

  /**
   * Pauses the sandbox and saves its memory, leaving it paused. If that fails the sandbox is not
   * lost: it is resumed and its agent woken (or, if even that fails, stopped) and the error says so.
   */
  private async pauseAndSave(live: LiveSandbox, imageDir: string, phases: PhaseTimer): Promise<void> {
    const { sandboxId } = live.record;
    try {
      await this.deps.driver.pause(sandboxId);
      phases.mark('pause');
      await this.deps.driver.checkpoint(sandboxId, imageDir, { leaveRunning: true });
    } catch (err) {
      const recovered = await this.deps.driver
        .resume(sandboxId)
        .then(() => this.deps.link.wake(sandboxId))
        .then(() => this.deps.link.waitReady(sandboxId, live.daemon))
        .then(
          () => true,
          () => false,
        );
      if (!recovered) await this.deps.stop(sandboxId);
      throw new SpaceError(
        ErrorCode.FULL_CHECKPOINT_FAILED,
        `${(err as Error).message}${this.deps.live.find(sandboxId) ? '' : '; the sandbox stopped and the session resumes on the next call'}`,
      );
    }
  }
}
