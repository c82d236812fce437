import { ErrorCode, isSpaceError } from '@space/protocol';
import type { Caller } from '../tenants/auth.js';
import type { Activity } from './activity.js';
import type { SessionCheckpointService } from './session-checkpoint-service.js';
import type { SessionService } from './session-service.js';

/**
 * Durable kernels: once a code cell has ended and its session has had no call for its
 * `codeCheckpointDelayMs`, a full checkpoint holds the kernels, so a sandbox that dies afterwards
 * resumes with every variable of every context. Cells in quick succession make one checkpoint
 * after the last. The timers live in the control plane that ran the cell; one that stops loses
 * them, and the periodic full checkpoints (`fullCheckpointIntervalSec`) still come.
 */
export class CellCheckpoints {
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly deps: {
      sessions: SessionService;
      checkpoints: SessionCheckpointService;
      activity: Activity;
      keepAutomatic: number;
      log: (message: string) => void;
      now: () => number;
    },
  ) {}

  /** A cell of the session ended (its answer is sent): its checkpoint is (re)scheduled. Never fails: a session gone meanwhile needs none. */
  async ended(caller: Caller, sessionId: string): Promise<void> {
    const row = await this.deps.sessions.row(caller, sessionId).catch(() => null);
    if (row) this.schedule(caller, sessionId, row.codeCheckpointDelayMs, row.codeCheckpointDelayMs);
  }

  private schedule(caller: Caller, sessionId: string, waitMs: number, delayMs: number): void {
    clearTimeout(this.timers.get(sessionId));
    this.timers.delete(sessionId);
    if (delayMs <= 0) return;
    const timer = setTimeout(() => {
      this.timers.delete(sessionId);
      void this.due(caller, sessionId, delayMs);
    }, waitMs);
    timer.unref();
    this.timers.set(sessionId, timer);
  }

  private async due(caller: Caller, sessionId: string, delayMs: number): Promise<void> {
    // A call since (another cell, an exec) moves the checkpoint to `delayMs` after it.
    const quietFor = this.deps.now() - (this.deps.activity.lastUsedAt(sessionId) ?? 0);
    if (this.deps.activity.busy(sessionId) || quietFor < delayMs) return this.schedule(caller, sessionId, Math.max(50, delayMs - quietFor), delayMs);
    try {
      const row = await this.deps.sessions.row(caller, sessionId);
      if (!row.sandboxId) return;
      await this.deps.checkpoints.createAutomatic(caller, sessionId, 'full', this.deps.keepAutomatic);
    } catch (err) {
      // Deleted meanwhile: nothing to hold. Refused (an fs checkpoint was taken instead) or stopped: the next cell tries again.
      if (isSpaceError(err) && err.code === ErrorCode.SESSION_NOT_FOUND) return;
      const what = isSpaceError(err) ? `${err.code}: ${err.message}` : String(err);
      this.deps.log(`session ${sessionId}: no full checkpoint after its code cell: ${what.slice(0, 300)}`);
    }
  }

  /** Drops the timers (the control plane stops). */
  close(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
