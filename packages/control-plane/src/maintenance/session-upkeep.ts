import { ErrorCode, anyProcessRuns, isSpaceError, type CheckpointKind, type SandboxInfo } from '@space/protocol';
import type { SessionCheckpointService } from '../sessions/session-checkpoint-service.js';
import type { Activity } from '../sessions/activity.js';
import type { Metrics } from '../metrics/metrics.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { SessionService } from '../sessions/session-service.js';
import type { SessionPauser } from '../sessions/session-pauser.js';
import type { CheckpointRow, SessionRow, Store } from '../store/store.js';
import { type SessionDue, type SessionFacts, idleForMs, nextDueAt, sessionDue } from './session-policy.js';

/** The sandboxes a node listed in this pass, by sandbox id. */
export type OnNode = ReadonlyMap<string, SandboxInfo>;

/** Whether the policy looks at the session's checkpoints: only while it has a running sandbox (else none is read). */
export const looksAtCheckpoints = (row: SessionRow): boolean => row.status === 'running' && row.sandboxId !== null;

/** A session's facts with the id of its newest checkpoint, what a volume change is measured against. */
type UpkeepFacts = SessionFacts & { newestId: string | null };

export interface SessionUpkeepDeps {
  store: Store;
  nodes: NodeDirectory;
  sessions: SessionService;
  checkpoints: SessionCheckpointService;
  pauser: SessionPauser;
  activity: Activity;
  metrics: Metrics;
  log: (message: string) => void;
  /** Automatic checkpoints kept per session; older ones are deleted (manual ones never are). */
  keepAutomatic: number;
  /** The share of a busy sandbox's time automatic full checkpoints may keep it paused (0.02: 2%; see session-policy.ts). */
  fullCheckpointPauseShare: number;
  now: () => number;
}

/**
 * Carries out what `sessionDue` says is due for one session, in that session's turn of its queue:
 * reconciliation with the node, expiry, idle stops, automatic checkpoints with their retention.
 * It keeps what the policy needs to remember between passes (when a full checkpoint was tried, the
 * volume found unchanged, an idle stop given up) in this control plane's memory: a control plane
 * that starts again just looks once more.
 */
export class SessionUpkeep {
  private readonly fullTried = new Map<string, number>();
  private readonly idleRefusals = new Map<string, number>();
  private readonly unchangedAt = new Map<string, number>();

  constructor(private readonly deps: SessionUpkeepDeps) {}

  /**
   * Everything due for the session; `onNode` is what its node listed this pass. Returns when its
   * next visit is due (`nextDueAt`), or null when this one changed the session's row (then it is due
   * at once, and the next pass works the time out from what it finds).
   */
  async upkeep(row: SessionRow, onNode: OnNode): Promise<number | null> {
    const checkpoints = await this.checkpointsOf(row);
    let facts = this.facts(row, onNode, checkpoints);
    let due = this.due(facts);
    if (due.action === 'undo-start' || due.action === 'confirm-gone') {
      if (await this.reconcile(row, due.action)) return null;
      // The node still runs it after all (the list was read before this session's turn).
      facts = { ...facts, sandboxListed: true };
      due = this.due(facts);
    }
    if (due.action === 'expire') {
      this.deps.log(`session ${row.id} reached its timeout: ${await this.deps.pauser.expireLocked(row)}`);
      return null;
    }
    if (due.action === 'stop-idle') {
      await this.stopIdle(row);
      return null;
    }
    // What this visit took or found (a volume unchanged, a full checkpoint needless) counts from now.
    const taken = due.action === 'checkpoint' && (await this.checkpointIfNeeded(row, due.full, due.fs, facts));
    const after = taken ? await this.checkpointsOf(row) : checkpoints;
    return this.nextVisit(row, onNode, after);
  }

  /**
   * A look at the session without its lease (from `newest`, its newest checkpoint of each kind as
   * the pass read them, and, when a checkpoint is due, its volume and processes on the node): when
   * its next visit is due if nothing needs doing now, or null when something does (then `upkeep`, in
   * the session's turn, reads its checkpoints again and decides). Most visits end here: a running
   * session is mostly found unchanged. `row` and `newest` may be a little old: a checkpoint taken
   * since only makes the next visit sooner than needed, and the time is recorded only if the row did
   * not change since (`Store.scheduleMaintenance`).
   */
  async look(row: SessionRow, onNode: OnNode, newest: CheckpointRow[]): Promise<number | null> {
    const facts = this.facts(row, onNode, newest);
    const due = this.due(facts);
    if (due.action === 'checkpoint' ? await this.checkpointToTake(row, due.full, due.fs, facts) : due.action !== 'none') return null;
    // What it found (a volume unchanged, a full checkpoint needless) counts from now.
    return this.nextVisit(row, onNode, newest);
  }

  /** Only the reconciliation: run before the control plane serves its first call. */
  async reconcileOnly(row: SessionRow, onNode: OnNode): Promise<void> {
    // Reconciliation looks at no checkpoint: none is read.
    const due = this.due(this.facts(row, onNode, []));
    if (due.action === 'undo-start' || due.action === 'confirm-gone') await this.reconcile(row, due.action);
  }

  /** What the policy says is due now. */
  private due(facts: SessionFacts): SessionDue {
    return sessionDue(facts, this.deps.now(), this.deps.fullCheckpointPauseShare);
  }

  /** When the session's next visit is due, from its facts as they are now (with what this visit found). */
  private nextVisit(row: SessionRow, onNode: OnNode, checkpoints: CheckpointRow[]): number {
    return nextDueAt(this.facts(row, onNode, checkpoints), this.deps.now(), this.deps.fullCheckpointPauseShare);
  }

  /** The session's checkpoints, read only when it has a running sandbox: the only case the policy looks at them. */
  private async checkpointsOf(row: SessionRow): Promise<CheckpointRow[]> {
    return looksAtCheckpoints(row) ? this.deps.store.listCheckpoints(row.id) : [];
  }

  /** The session's facts, with what a volume change is measured against. */
  private facts(row: SessionRow, onNode: OnNode, checkpoints: CheckpointRow[]): UpkeepFacts {
    const newestFull = checkpoints.filter((c) => c.kind === 'full').at(-1);
    const newest = checkpoints.at(-1);
    const listed = row.sandboxId === null ? undefined : onNode.get(row.sandboxId);
    return {
      row,
      sandboxListed: listed !== undefined,
      newestAt: newest ? Date.parse(newest.createdAt) : null,
      newestFull: newestFull ? { at: Date.parse(newestFull.createdAt), pauseMs: newestFull.pauseMs } : null,
      lastUsedAt: this.deps.activity.lastUsedAt(row.id) ?? null,
      fullTriedAt: this.fullTried.get(row.id) ?? null,
      unchangedAt: this.unchangedAt.get(row.id) ?? null,
      idleRefusedAt: this.idleRefusals.get(row.id) ?? null,
      newestId: newest?.id ?? null,
      quiet: newest !== undefined && listed?.quietSince === newest.id,
    };
  }

  /**
   * Brings the session's record in line with the node: a sandbox the node does not run (it died with
   * a node agent's restart or crash) is forgotten, and a start a crash interrupted is undone. The
   * next call resumes the session. True when it changed.
   */
  private async reconcile(row: SessionRow, action: 'undo-start' | 'confirm-gone'): Promise<boolean> {
    if (action === 'undo-start') {
      await this.deps.store.updateSession(row.id, { status: 'stopped', sandboxId: null, nodeId: null, sandboxStartedAt: null });
      this.reconciled(row, 'a start was interrupted');
      return true;
    }
    const sandboxId = row.sandboxId!;
    // The list was read before this session's turn: ask once more before forgetting the sandbox.
    const stillThere = await (await this.deps.nodes.forSandbox(row)).sandboxInfo(sandboxId).then(
      () => true,
      (err: unknown) => {
        if (isSpaceError(err) && err.code === ErrorCode.SANDBOX_NOT_FOUND) return false;
        throw err;
      },
    );
    if (stillThere) return false;
    await this.deps.sessions.forgetSandbox(row, sandboxId, 'lost');
    this.reconciled(row, `its sandbox ${sandboxId} is no longer running on the node`);
    return true;
  }

  private reconciled(row: SessionRow, why: string): void {
    this.deps.metrics.inc('sessions_reconciled');
    this.deps.log(`session ${row.id}: ${why}; marked stopped (the next call resumes it)`);
  }

  /** Takes the checkpoint `checkpointToTake` says is needed, if any; true when one was taken. */
  private async checkpointIfNeeded(row: SessionRow, full: 'due' | 'if-changed' | null, fs: boolean, facts: UpkeepFacts): Promise<boolean> {
    const kind = await this.checkpointToTake(row, full, fs, facts);
    if (kind) await this.autoCheckpoint(row, kind);
    return kind !== null;
  }

  /**
   * A full checkpoint when one is due and processes run (else it is not due again for an interval),
   * else an fs one when due and the volume changed; null when neither is needed. A sandbox its node
   * listed quiet since the newest checkpoint is neither changed nor running a process: the node is not asked.
   */
  private async checkpointToTake(row: SessionRow, full: 'due' | 'if-changed' | null, fs: boolean, facts: UpkeepFacts): Promise<CheckpointKind | null> {
    let changed: boolean | undefined;
    const isChanged = async () => (changed ??= await this.changedSinceNewest(row, facts));
    if (full === 'due' || (full === 'if-changed' && (await isChanged()))) {
      if (!facts.quiet && (await this.hasRunningProcess(row))) return 'full';
      // Without any process the files are all there is to save.
      this.fullTried.set(row.id, this.deps.now());
    }
    return fs && (await isChanged()) ? 'fs' : null;
  }

  /**
   * Whether the volume was written since the newest checkpoint (read in this turn), asked of its node
   * unless the node listed the sandbox quiet since it; when it was not, the interval starts again from now.
   */
  private async changedSinceNewest(row: SessionRow, { newestId, quiet }: UpkeepFacts): Promise<boolean> {
    if (!newestId || (!quiet && (await (await this.deps.nodes.forVolume(row)).volumeChanged(row.id, newestId)))) return true;
    this.unchangedAt.set(row.id, this.deps.now());
    this.deps.metrics.inc('checkpoints_skipped_unchanged');
    if (quiet) this.deps.metrics.inc('checkpoints_skipped_quiet');
    return false;
  }

  /** Takes an automatic checkpoint and prunes old ones; returns the kind actually taken. */
  private async autoCheckpoint(row: SessionRow, kind: CheckpointKind): Promise<CheckpointKind> {
    let taken = kind;
    if (kind === 'full') this.fullTried.set(row.id, this.deps.now());
    try {
      await this.deps.checkpoints.createLocked(row, kind, 'auto');
    } catch (err) {
      if (!isSpaceError(err) || !err.details?.fallbackCheckpointId) throw err;
      this.deps.log(`session ${row.id}: ${err.message}`);
      taken = 'fs';
    }
    await this.deps.checkpoints.pruneLocked(row.id, this.deps.keepAutomatic);
    return taken;
  }

  /** Whether any process runs in the sandbox besides its init and daemon, however it was started. */
  private async hasRunningProcess(row: SessionRow): Promise<boolean> {
    return anyProcessRuns(await (await this.deps.nodes.forSandbox(row)).processes(row.sandboxId!));
  }

  /**
   * Stops a sandbox idle for `idleTimeoutSec` (no call, no foreground command) after a full
   * checkpoint, so its processes come back on the next call. When the full checkpoint is refused
   * (fs taken instead) and processes run, the sandbox keeps running: stopping it would lose them.
   */
  private async stopIdle(row: SessionRow): Promise<void> {
    const taken = await this.autoCheckpoint(row, 'full');
    if (taken !== 'full' && (await this.hasRunningProcess(row))) {
      this.idleRefusals.set(row.id, this.deps.now());
      this.deps.log(`session ${row.id} is idle but keeps its sandbox: its processes cannot be saved in a full checkpoint now`);
      return;
    }
    // A call may have arrived (here or through another control plane) while the checkpoint was taken: then the session is not idle after all.
    const current = await this.deps.store.getSession(row.tenantId, row.id);
    if (!current || this.deps.activity.busy(row.id)) return;
    const facts = { row: current, lastUsedAt: this.deps.activity.lastUsedAt(row.id) ?? null, idleRefusedAt: this.idleRefusals.get(row.id) ?? null };
    if (idleForMs(facts, this.deps.now()) < row.idleTimeoutSec * 1000) return;
    await (await this.deps.nodes.forSandbox(row)).stopSandbox(row.sandboxId!);
    await this.deps.sessions.markIdle(row, row.sandboxId!);
    this.deps.metrics.inc('idle_stops');
    this.deps.log(`session ${row.id} idle for ${row.idleTimeoutSec} s: took a ${taken} checkpoint and stopped its sandbox`);
  }
}
