import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCode, SpaceError, isSpaceError } from '@space/protocol';
import { CallDeadline } from '@space/server-kit';
import type { Activity } from './activity.js';
import type { Caller } from '../tenants/auth.js';
import type { LifecycleQueue } from './lifecycle-queue.js';
import type { SandboxTarget, SessionService } from './session-service.js';
import type { SessionLeaseRow, SessionRow, Store } from '../store/store.js';
import { isPlacementStale } from './placements.js';
import { isSandboxDeath, type SandboxDeath } from './sandbox-deaths.js';

/** Why a sandbox died, as the node said (`details.endReason`: a host limit it ran into, or it stopped answering), else `died`. */
function deathReason(err: SpaceError): SandboxDeath {
  const reason = err.details?.endReason;
  return isSandboxDeath(reason) ? reason : 'died';
}

/** What a call gets when the sandbox under it is gone, dies, or stops answering as it is stopped. */
const lostSandboxCodes = new Set<string>([ErrorCode.SANDBOX_NOT_FOUND, ErrorCode.SANDBOX_DIED, ErrorCode.SANDBOX_UNAVAILABLE]);

/** How a call is sent to the sandbox: whether it may be sent again, and until when it is worth sending. */
export interface SandboxCallOptions {
  /** Its input is still in hand: a sandbox found gone before the call reached it is replaced and the call sent again. */
  repeatable: boolean;
  /** Past it (or once its client left) a call that waited is dropped before it is sent (`DEADLINE_EXCEEDED`). */
  deadline?: CallDeadline;
  /** The session with its lease, as the route just read it (`SessionService.rowWithLease`): not read again. */
  read?: { row: SessionRow; lease: SessionLeaseRow | null };
}

/**
 * Calls that use a session's sandbox (exec, files, streams): each runs on the sandbox serving the
 * session, resuming the session first when there is none, and counts as activity (the session is
 * not idle while one runs). They run side by side; one arriving during a lifecycle operation waits
 * for it, and is dropped instead if its deadline passed or its client left meanwhile.
 */
export class SessionCalls {
  constructor(
    private readonly store: Store,
    private readonly sessions: SessionService,
    private readonly lifecycle: LifecycleQueue,
    private readonly activity: Activity,
    /** The budget of a call whose client names none (`SPACE_CALL_DEADLINE_SEC`). */
    private readonly defaultDeadlineMs: number,
  ) {}

  /** A request's deadline: its `x-space-timeout-ms`, else the default; over once its client leaves. */
  deadline(req: IncomingMessage, res: ServerResponse): CallDeadline {
    return CallDeadline.of(req, res, this.defaultDeadlineMs);
  }

  /**
   * Runs `op` against the session's sandbox, resuming the session first when its sandbox is gone.
   * A sandbox found dead before the call reached it (SANDBOX_NOT_FOUND) is replaced and the call
   * sent again when its input is still in hand (`repeatable`); operations that stream their input
   * check the sandbox first instead. A sandbox that dies during a call (SANDBOX_DIED) is not
   * retried, since the call may have partly run; the next call resumes the session. One that the
   * session's own restore or kill stopped during the call answers SANDBOX_STOPPED (409).
   */
  async withSandbox<T>(caller: Caller, id: string, { repeatable, deadline, read }: SandboxCallOptions, op: (target: SandboxTarget) => Promise<T>): Promise<T> {
    // One read of the session (with its lease) when no lifecycle operation is under way, the usual case.
    const first = read ?? (await this.sessions.rowWithLease(caller, id));
    const done = this.activity.begin(id);
    try {
      // A call that arrives during a restore or delete runs on what it leaves (or finds no session).
      let row = first.row;
      if (!this.lifecycle.isSettled(id, first.lease)) {
        await this.lifecycle.settled(id);
        row = await this.sessions.row(caller, id);
      }
      // Checked here, and by the node again (where it may wait behind a full checkpoint's pause).
      const send = (target: SandboxTarget): Promise<T> => {
        if (!deadline) return op(target);
        deadline.check(`session ${id}`);
        return op({ ...target, node: target.node.within(deadline.remainingMs()) });
      };
      return await this.runOnSandbox(row, repeatable, send);
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
      if (isPlacementStale(err)) {
        // The node has seen a newer placement than the one read here, and refused before anything ran: sent to that one.
        const now = await this.store.getSession(row.tenantId, row.id);
        if (!now) throw new SpaceError(ErrorCode.SESSION_NOT_FOUND, `session ${row.id} was deleted during this call`);
        if (!repeatable) throw err;
        return op(await this.sessions.ensureSandbox(now));
      }
      if (await this.nodeLost(err, target)) {
        // Its node is gone: the next start moves the session to another node.
        await this.sessions.forgetSandbox(row, target.sandboxId, 'lost');
        if (!repeatable)
          throw new SpaceError(
            ErrorCode.SANDBOX_DIED,
            `node ${target.node.nodeId} was lost as this call began; the session resumes on another node on the next call`,
          );
        return op(await this.sessions.ensureSandbox({ ...row, sandboxId: null, nodeId: null, status: 'stopped' }));
      }
      if (!isSpaceError(err) || !lostSandboxCodes.has(err.code)) throw err;
      const stoppedBy = await this.stoppedOnPurpose(row, target);
      // Gone before the call reached it (nothing of the call ran), or under the call (part may have run).
      const underTheCall = err.code !== ErrorCode.SANDBOX_NOT_FOUND;
      if (stoppedBy === null) {
        // Unreachable but not stopped by anyone: the node's answer stands.
        if (err.code === ErrorCode.SANDBOX_UNAVAILABLE) throw err;
        await this.sessions.forgetSandbox(row, target.sandboxId, deathReason(err));
        if (underTheCall) throw err;
        if (!repeatable) throw new SpaceError(ErrorCode.SANDBOX_DIED, 'the sandbox died as this call began; the session resumes on the next call');
      } else if (underTheCall || !repeatable) {
        throw new SpaceError(ErrorCode.SANDBOX_STOPPED, `the session's sandbox was stopped during this call (${stoppedBy}); the next call runs on the new one`);
      }
      return op(await this.sessions.ensureSandbox({ ...row, sandboxId: null, status: 'stopped' }));
    }
  }

  /**
   * Whether a lifecycle operation stopped the sandbox a call lost: once that operation is over, a
   * delete answers SESSION_NOT_FOUND, a restore or kill is named (a conflict with the caller's own
   * operation, not a fault); null when the sandbox died on its own.
   */
  private async stoppedOnPurpose(row: SessionRow, target: SandboxTarget): Promise<string | null> {
    await this.lifecycle.settled(row.id).catch(() => undefined);
    if (!(await this.store.getSession(row.tenantId, row.id)))
      throw new SpaceError(ErrorCode.SESSION_NOT_FOUND, `session ${row.id} was deleted during this call`);
    const endReason = (await this.store.listSandboxHistory(row.id)).find((h) => h.id === target.sandboxId)?.endReason;
    if (endReason === 'restored') return 'the session was restored to a checkpoint';
    if (endReason === 'killed') return 'it was killed';
    return null;
  }

  /** Whether a call failed because the node of its sandbox is lost (not merely slow to answer once). */
  private async nodeLost(err: unknown, target: SandboxTarget): Promise<boolean> {
    return isSpaceError(err) && err.code === ErrorCode.NODE_UNAVAILABLE && (await this.sessions.onLostNode(target.node.nodeId));
  }

  private async confirmAlive(row: SessionRow, target: SandboxTarget): Promise<SandboxTarget> {
    try {
      await target.node.sandboxInfo(target.sandboxId);
      return target;
    } catch (err) {
      const lost = await this.nodeLost(err, target);
      if (!lost && (!isSpaceError(err) || err.code !== ErrorCode.SANDBOX_NOT_FOUND)) throw err;
      await this.sessions.forgetSandbox(row, target.sandboxId, lost ? 'lost' : 'died');
      return this.sessions.ensureSandbox({ ...row, sandboxId: null, nodeId: null, status: 'stopped' });
    }
  }
}
