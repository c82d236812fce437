import { ErrorCode, SpaceError, isSpaceError } from '@space/protocol';
import type { Activity } from './activity.js';
import type { Caller } from './auth.js';
import type { LifecycleQueue } from './lifecycle-queue.js';
import type { SandboxTarget, SessionService } from './session-service.js';
import type { SessionRow, Store } from './store/store.js';

/**
 * Calls that use a session's sandbox (exec, files, streams): each runs on the sandbox serving the
 * session, resuming the session first when there is none, and counts as activity (the session is
 * not idle while one runs). They run side by side; one arriving during a lifecycle operation waits
 * for it.
 */
export class SessionCalls {
  constructor(
    private readonly store: Store,
    private readonly sessions: SessionService,
    private readonly lifecycle: LifecycleQueue,
    private readonly activity: Activity,
  ) {}

  /**
   * Runs `op` against the session's sandbox, resuming the session first when its sandbox is gone.
   * A sandbox found dead before the call reached it (SANDBOX_NOT_FOUND) is replaced and the call
   * sent again when its input is still in hand (`repeatable`); operations that stream their input
   * check the sandbox first instead. A sandbox that dies during a call (SANDBOX_DIED) is not
   * retried, since the call may have partly run; the next call resumes the session.
   */
  async withSandbox<T>(caller: Caller, id: string, { repeatable }: { repeatable: boolean }, op: (target: SandboxTarget) => Promise<T>): Promise<T> {
    this.sessions.row(caller, id);
    const done = this.activity.begin(id);
    try {
      // A call that arrives during a restore or delete runs on what it leaves (or finds no session).
      await this.lifecycle.settled(id);
      return await this.runOnSandbox(this.sessions.row(caller, id), repeatable, op);
    } finally {
      done();
    }
  }

  /** An open stream is a call in progress: the session is not idle while it lasts. Returns what marks its end. */
  trackStream(sessionId: string): () => void {
    return this.activity.begin(sessionId);
  }

  private async runOnSandbox<T>(row: SessionRow, repeatable: boolean, op: (target: SandboxTarget) => Promise<T>): Promise<T> {
    let target = await this.sessions.ensureSandbox(row);
    if (!repeatable) target = await this.confirmAlive(row, target);
    try {
      return await op(target);
    } catch (err) {
      if (!isSpaceError(err) || (err.code !== ErrorCode.SANDBOX_NOT_FOUND && err.code !== ErrorCode.SANDBOX_DIED)) throw err;
      await this.explainLostSandbox(row, target, err);
      if (!repeatable) throw new SpaceError(ErrorCode.SANDBOX_DIED, 'the sandbox died as this call began; the session resumes on the next call');
      return op(await this.sessions.ensureSandbox({ ...row, sandboxId: null, status: 'stopped' }));
    }
  }

  /**
   * The sandbox was gone or died under the call. A delete, restore or kill may have stopped it:
   * once that operation is over, the caller learns which (SESSION_NOT_FOUND, or SANDBOX_DIED naming
   * it); otherwise it died on its own and the session forgets it. Returns when the call may be sent
   * again (the sandbox was gone before the call reached it).
   */
  private async explainLostSandbox(row: SessionRow, target: SandboxTarget, err: SpaceError): Promise<void> {
    await this.lifecycle.settled(row.id).catch(() => undefined);
    if (!this.store.getSession(row.tenantId, row.id)) throw new SpaceError(ErrorCode.SESSION_NOT_FOUND, `session ${row.id} was deleted during this call`);
    const stoppedOnPurpose = this.store.listSandboxHistory(row.id).find((h) => h.id === target.sandboxId)?.endReason;
    if (stoppedOnPurpose === 'restored' || stoppedOnPurpose === 'killed') {
      if (err.code !== ErrorCode.SANDBOX_DIED) return;
      const cause = stoppedOnPurpose === 'restored' ? 'the session was restored to a checkpoint' : 'it was killed';
      throw new SpaceError(ErrorCode.SANDBOX_DIED, `the session's sandbox was stopped during this call (${cause}); the next call runs on the new one`);
    }
    this.sessions.forgetSandbox(row, target.sandboxId, 'died');
    if (err.code === ErrorCode.SANDBOX_DIED) throw err;
  }

  private async confirmAlive(row: SessionRow, target: SandboxTarget): Promise<SandboxTarget> {
    try {
      await target.node.sandboxInfo(target.sandboxId);
      return target;
    } catch (err) {
      if (!isSpaceError(err) || err.code !== ErrorCode.SANDBOX_NOT_FOUND) throw err;
      this.sessions.forgetSandbox(row, target.sandboxId, 'died');
      return this.sessions.ensureSandbox({ ...row, sandboxId: null, status: 'stopped' });
    }
  }
}
