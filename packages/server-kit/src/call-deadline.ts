import type { IncomingMessage, ServerResponse } from 'node:http';
import { CALL_TIMEOUT_HEADER, ErrorCode, SpaceError, callTimeoutOf } from '@space/protocol';

/**
 * When a call stops being worth running: its client's budget (`x-space-timeout-ms`, else the
 * server's default) has passed, or its client closed the connection before the answer. Checked
 * where a call may have waited (for a session's lifecycle operation, a resume, a move) before it is
 * sent on, so a call its caller gave up on is never carried out later.
 */
export class CallDeadline {
  private left = false;

  private constructor(
    private readonly at: number,
    private readonly now: () => number,
  ) {}

  /** The deadline of a request: from its header or `defaultMs`; `res` tells when its client leaves. */
  static of(req: IncomingMessage, res: ServerResponse, defaultMs: number, now: () => number = Date.now): CallDeadline {
    const deadline = new CallDeadline(now() + (callTimeoutOf(req.headers[CALL_TIMEOUT_HEADER]) ?? defaultMs), now);
    res.once('close', () => {
      if (!res.writableFinished) deadline.left = true;
    });
    return deadline;
  }

  /** A deadline `ms` from now, for a call made inside the process. */
  static after(ms: number, now: () => number = Date.now): CallDeadline {
    return new CallDeadline(now() + ms, now);
  }

  /** What is left of the budget, ms (Infinity for a call without one). */
  remainingMs(): number {
    return this.at - this.now();
  }

  /** Throws DEADLINE_EXCEEDED when the call should not start: `what` names where it waited. */
  check(what: string): void {
    if (this.left) throw new SpaceError(ErrorCode.DEADLINE_EXCEEDED, `the client left while the call waited for ${what}: it was not run`);
    if (this.now() >= this.at)
      throw new SpaceError(ErrorCode.DEADLINE_EXCEEDED, `the call's deadline (${CALL_TIMEOUT_HEADER}) passed while it waited for ${what}: it was not run`);
  }
}
