import { type Checkpoint, ErrorCode, SpaceError, isSpaceError } from '@space/protocol';
import type { Caller } from '../tenants/auth.js';
import type { Metrics } from '../metrics/metrics.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import { type SessionCheckpointService, toCheckpoint } from './session-checkpoint-service.js';
import { type SessionService, expiryFrom } from './session-service.js';
import type { SessionRow, Store } from '../store/store.js';

export interface SessionPauserDeps {
  store: Store;
  nodes: NodeDirectory;
  sessions: SessionService;
  checkpoints: SessionCheckpointService;
  metrics: Metrics;
  /** Automatic checkpoints kept per session: a pause's checkpoint is one of them. */
  keepAutomatic: number;
  now?: () => number;
}

/**
 * Pauses and expires sessions. A pause saves the sandbox in a checkpoint (full where the sandbox
 * allows it, so its processes continue on the next call; else fs) and stops it; the session
 * stays, and any call resumes it. A session whose timeout passed is paused or deleted
 * (`onTimeout`), by the maintenance.
 */
export class SessionPauser {
  private readonly now: () => number;

  constructor(private readonly deps: SessionPauserDeps) {
    this.now = deps.now ?? Date.now;
  }

  async pause(caller: Caller, sessionId: string): Promise<Checkpoint> {
    return this.deps.sessions.inTurn(caller, sessionId, 'pause', (row) => this.pauseLocked(row));
  }

  /** `pause` for a caller that holds the session's lifecycle queue. */
  async pauseLocked(row: SessionRow): Promise<Checkpoint> {
    if (!row.sandboxId) throw new SpaceError(ErrorCode.SESSION_NOT_RUNNING, `session ${row.id} has no sandbox running: it is paused or stopped already`);
    const checkpoint = await this.saveProcessesIfPossible(row);
    await this.deps.checkpoints.pruneLocked(row.id, this.deps.keepAutomatic);
    await (await this.deps.nodes.forSandbox(row)).stopSandbox(row.sandboxId);
    await this.deps.sessions.markIdle(row, row.sandboxId, 'paused');
    this.deps.metrics.inc('pauses');
    return checkpoint;
  }

  /** Sets the session's timeout, counted from now; 0 removes it. */
  async setTimeout(caller: Caller, sessionId: string, timeoutSec: number, onTimeout?: SessionRow['onTimeout']): Promise<void> {
    const row = await this.deps.sessions.row(caller, sessionId);
    await this.deps.store.updateSession(row.id, { expiresAt: expiryFrom(this.now(), timeoutSec), onTimeout: onTimeout ?? row.onTimeout });
  }

  /**
   * Acts on a session whose timeout passed (the caller holds its lifecycle queue): deleted, or
   * paused with its timeout cleared (the next call resumes it; E2B clients set a new timeout then).
   */
  async expireLocked(row: SessionRow): Promise<'deleted' | 'paused'> {
    this.deps.metrics.inc('session_timeouts', { action: row.onTimeout });
    if (row.onTimeout === 'delete') {
      await this.deps.sessions.deleteLocked(row);
      return 'deleted';
    }
    // Cleared once paused: a pause that failed (its node away) is tried again on the next pass.
    if (row.sandboxId) await this.pauseLocked(row);
    await this.deps.store.updateSession(row.id, { expiresAt: null });
    return 'paused';
  }

  private async saveProcessesIfPossible(row: SessionRow): Promise<Checkpoint> {
    try {
      return await this.deps.checkpoints.createLocked(row, 'full', 'auto');
    } catch (err) {
      const fallbackId = isSpaceError(err) ? (err.details?.fallbackCheckpointId as string | undefined) : undefined;
      if (!fallbackId) throw err;
      const fallback = await this.deps.store.getCheckpoint(row.tenantId, fallbackId);
      if (!fallback) throw err;
      return toCheckpoint(fallback);
    }
  }
}
