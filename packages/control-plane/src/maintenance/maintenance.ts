import { ErrorCode, isSpaceError, type CheckpointKind, type SandboxInfo } from '@space/protocol';
import type { SessionCheckpointService } from '../sessions/session-checkpoint-service.js';
import type { Activity } from '../sessions/activity.js';
import type { LifecycleQueue } from '../sessions/lifecycle-queue.js';
import type { Metrics } from '../metrics/metrics.js';
import type { TemplateBuilds } from '../builds/template-builds.js';
import type { NodeClient } from '../cluster/node-client.js';
import { type NodeDirectory, mayRunOn } from '../cluster/node-directory.js';
import type { CheckpointShipper } from '../checkpoints/checkpoint-shipper.js';
import type { CheckpointTaker } from '../checkpoints/checkpoint-taker.js';
import type { SessionService } from '../sessions/session-service.js';
import type { SessionPauser } from '../sessions/session-pauser.js';
import type { EgressService } from '../tenants/egress-service.js';
import type { SessionRow, Store } from '../store/store.js';

export interface MaintenanceDeps {
  store: Store;
  /** Takes the checkpoints that rescue volumes left on lost nodes. */
  taker: CheckpointTaker;
  nodes: NodeDirectory;
  shipper: CheckpointShipper;
  sessions: SessionService;
  checkpoints: SessionCheckpointService;
  pauser: SessionPauser;
  activity: Activity;
  lifecycle: LifecycleQueue;
  egress: EgressService;
  /** Dockerfile builds: those whose control plane died are failed here. */
  builds: Pick<TemplateBuilds, 'failStale'>;
  metrics: Metrics;
  log: (message: string) => void;
  /** Automatic checkpoints kept per session; older ones are deleted (manual ones never are). */
  keepAutomatic: number;
  /**
   * The share of a busy sandbox's time automatic full checkpoints may keep it paused (0.02: 2%).
   * While its volume is written they come as often as that allows from the newest one's pause,
   * never more than every 10 s, and at least every `fullCheckpointIntervalSec`.
   */
  fullCheckpointPauseShare: number;
  now?: () => number;
}

/** What each node that answered runs, by node id. */
type ListedSandboxes = Map<string, { node: NodeClient; sandboxes: SandboxInfo[] }>;

/** Unrecorded checkpoints are swept this often, once older than the grace period. */
const orphanSweepEveryMs = 60_000;
const orphanGraceMs = 60_000;
/** The shortest interval between automatic full checkpoints of a busy sandbox, however cheap they are. */
const minBusyFullIntervalMs = 10_000;

/**
 * The periodic work on sessions, each in its session's lifecycle queue (a session busy with its own
 * operation is left for the next pass):
 * - reconciliation: a session whose sandbox the node no longer runs is marked stopped, and one left
 *   `starting` by a crash too, so nothing acts on a sandbox that is gone;
 * - automatic fs checkpoints every `checkpointIntervalSec`, taken only when the volume was written
 *   since the last one, and full ones every `fullCheckpointIntervalSec` while processes run (with
 *   none, the files are all there is to save), sooner while the volume is written (see
 *   `fullCheckpointPauseShare`); retention of the last `keepAutomatic` of each kind;
 * - stopping sandboxes idle for `idleTimeoutSec` (no call, no foreground command) after a full
 *   checkpoint, so their processes come back on the next call. When the full checkpoint is refused
 *   (fs taken instead) and processes run, the sandbox keeps running: stopping it would lose them;
 * - sessions whose timeout (`expiresAt`) passed are deleted or paused, as their `onTimeout` says.
 */
export class Maintenance {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly now: () => number;
  /** When a full checkpoint was last tried per session: a refused one is not retried every tick. */
  private readonly fullAttempts = new Map<string, number>();
  /** When an idle stop was last given up per session (full refused, processes running). */
  private readonly idleRefusals = new Map<string, number>();
  /** When a session's volume was last found unchanged since its newest checkpoint: counts as a checkpoint for the interval. */
  private readonly unchangedAt = new Map<string, number>();
  private lastOrphanSweep = 0;

  constructor(private readonly deps: MaintenanceDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(tickMs: number): void {
    // A pass that fails as a whole (the database is away) is logged; the next tick tries again.
    this.timer = setInterval(() => void this.tick().catch((err: Error) => this.deps.log(`maintenance pass failed: ${err.message}`)), tickMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One pass over the sessions; passes never overlap. */
  tick(): Promise<void> {
    if (!this.running) this.running = this.pass().finally(() => (this.running = null));
    return this.running;
  }

  private async pass(): Promise<void> {
    await this.deps.activity.recordOpenCalls();
    // A node agent that restarted under running sandboxes lost their egress settings (memory only).
    for (const node of await this.deps.nodes.live()) {
      const health = await node.health().catch(() => null);
      if (health?.egressUnconfigured.length) await this.deps.egress.repairNode(health.egressUnconfigured);
    }
    if (this.now() - this.lastOrphanSweep >= orphanSweepEveryMs) {
      this.lastOrphanSweep = this.now();
      const removed = await this.deps.checkpoints.removeOrphans(orphanGraceMs).catch(() => 0);
      if (removed) this.deps.log(`removed ${removed} checkpoint(s) the store does not know`);
      const shipped = await this.deps.shipper.retryUnshipped(orphanGraceMs);
      if (shipped) this.deps.log(`shipped ${shipped} checkpoint(s) an earlier attempt did not`);
      await this.deps.shipper.collectBases().catch((err: Error) => this.deps.log(`unused ship bases not collected: ${err.message}`));
      const failed = await this.deps.builds.failStale(this.now()).catch(() => 0);
      if (failed) this.deps.log(`failed ${failed} template build(s) whose control plane stopped`);
    }
    const { listed, sessions } = await this.snapshot();
    await this.fenceMovedSessions(listed, sessions);
    await this.rescueLeftVolumes(listed);
    await this.eachSession(listed, sessions, async (row, running) => {
      if (await this.reconcile(row, running)) return;
      if (row.expiresAt && Date.parse(row.expiresAt) <= this.now()) {
        this.deps.log(`session ${row.id} reached its timeout: ${await this.deps.pauser.expireLocked(row)}`);
        return;
      }
      if (row.status !== 'running' || !row.sandboxId) return;
      if (this.idle(row)) await this.stopIdle(row);
      else if ((await this.fullCheckpointDue(row)) && (await this.processesRun(row))) await this.autoCheckpoint(row, 'full');
      else if ((await this.checkpointDue(row)) && (await this.changedSinceNewest(row))) await this.autoCheckpoint(row, 'fs');
    });
  }

  /**
   * A node that comes back after it was lost may still run sandboxes of sessions that moved to
   * another node meanwhile (or were deleted): they are stopped there, so a session never runs
   * twice. Their files stay on that node.
   */
  private async fenceMovedSessions(listed: ListedSandboxes, sessions: SessionRow[]): Promise<void> {
    const byId = new Map(sessions.map((s) => [s.id, s]));
    for (const { node, sandboxes } of listed.values()) {
      for (const sandbox of sandboxes) {
        const row = byId.get(sandbox.sessionId) ?? null;
        if (mayRunOn(row, node.nodeId)) continue;
        await node.stopSandbox(sandbox.sandboxId).catch(() => undefined);
        this.deps.log(
          `stopped sandbox ${sandbox.sandboxId} on node ${node.nodeId}: session ${sandbox.sessionId} ${row ? `moved to node ${row.volumeNodeId}` : 'no longer exists'}`,
        );
      }
    }
  }

  /**
   * A volume a session left on a lost node (what it wrote there after the checkpoint it moved on
   * from) becomes a `rescue` checkpoint of the session once that node answers again, shipped like
   * any other; then the volume is deleted there. One of a session deleted meanwhile is just
   * deleted, and one whose session lives on that node again (its move failed, or it came back) is
   * its volume: left alone. Decided in the session's turn, on what the store says then: a move
   * back onto that node (which rescues it itself) may have just ended.
   */
  private async rescueLeftVolumes(listed: ListedSandboxes): Promise<void> {
    for (const left of await this.deps.store.listLeftVolumes()) {
      const node = listed.get(left.nodeId)?.node;
      if (!node) continue;
      const stillLeft = async (): Promise<boolean> =>
        (await this.deps.store.listLeftVolumes()).some((l) => l.sessionId === left.sessionId && l.nodeId === left.nodeId);
      try {
        if (!(await this.deps.store.findSession(left.sessionId))) {
          await node.deleteVolume(left.sessionId);
          await this.deps.store.deleteLeftVolume(left.sessionId, left.nodeId);
          continue;
        }
        await this.deps.lifecycle.run(
          left.sessionId,
          'maintenance',
          async () => {
            const row = await this.deps.store.findSession(left.sessionId);
            if (!row || !(await stillLeft())) return;
            if (row.volumeNodeId !== left.nodeId) {
              const taken = await this.deps.taker.take(row, 'fs', 'rescue', node);
              this.deps.log(`session ${row.id}: what it wrote on node ${left.nodeId} after the checkpoint it moved on from is kept in ${taken.id}`);
              await node.deleteVolume(left.sessionId);
            }
            await this.deps.store.deleteLeftVolume(left.sessionId, left.nodeId);
          },
          { waitMs: 0 },
        );
      } catch (err) {
        if (isSpaceError(err) && err.code === ErrorCode.SESSION_BUSY) continue;
        this.deps.log(`the volume session ${left.sessionId} left on node ${left.nodeId} is not rescued yet: ${(err as Error).message}`);
      }
    }
  }

  /** Only the reconciliation, for every session: run before the control plane serves its first call. */
  async reconcileAll(): Promise<void> {
    const { listed, sessions } = await this.snapshot();
    await this.eachSession(listed, sessions, async (row, running) => void (await this.reconcile(row, running)));
  }

  /**
   * The sandboxes each live node runs, by node id (a node that does not answer is left out), then
   * every session: in that order, since a session is recorded before its sandbox starts, each listed
   * sandbox's session is among them.
   */
  private async snapshot(): Promise<{ listed: ListedSandboxes; sessions: SessionRow[] }> {
    const listed: ListedSandboxes = new Map();
    await Promise.all(
      (await this.deps.nodes.live()).map(async (node) => {
        const sandboxes = await node.listSandboxes().catch(() => null);
        if (sandboxes) listed.set(node.nodeId, { node, sandboxes });
      }),
    );
    return { listed, sessions: await this.deps.store.listAllSessions() };
  }

  /**
   * Runs `work` on each session in its turn of the session's queue, with the sandboxes its node runs.
   * A session busy with its own operation is skipped (the next pass comes soon), and so is one whose
   * node did not answer (or is lost).
   */
  private async eachSession(listed: ListedSandboxes, sessions: SessionRow[], work: (row: SessionRow, running: Set<string>) => Promise<void>): Promise<void> {
    const running = new Map([...listed].map(([nodeId, { sandboxes }]) => [nodeId, new Set(sandboxes.map((s) => s.sandboxId))]));
    for (const { id, tenantId, nodeId, volumeNodeId } of sessions) {
      if (this.deps.activity.busy(id) || this.deps.lifecycle.busyHere(id)) continue;
      const onNode = running.get(nodeId ?? volumeNodeId ?? '');
      if (!onNode) continue;
      try {
        await this.deps.lifecycle.run(
          id,
          'maintenance',
          async () => {
            const row = await this.deps.store.getSession(tenantId, id);
            // Its sandbox may have moved to another node since the list was read: that node's list is the one.
            if (row) await work(row, running.get(row.nodeId ?? row.volumeNodeId ?? '') ?? onNode);
          },
          { waitMs: 0 },
        );
      } catch (err) {
        if (isSpaceError(err) && err.code === ErrorCode.SESSION_BUSY) continue;
        this.deps.metrics.inc('checkpoint_failures');
        this.deps.log(`maintenance of ${id}: ${(err as Error).message}`);
      }
    }
  }

  /**
   * Brings the session's record in line with the node: a sandbox the node does not run (it died with
   * a node agent's restart or crash) is forgotten, and a start a crash interrupted (`starting` while
   * no one holds the session) is undone. The next call resumes the session. True when it changed.
   */
  private async reconcile(row: SessionRow, running: Set<string>): Promise<boolean> {
    if (row.status === 'starting') {
      await this.deps.store.updateSession(row.id, { status: 'stopped', sandboxId: null, nodeId: null, sandboxStartedAt: null });
      this.reconciled(row, 'a start was interrupted');
      return true;
    }
    if (!row.sandboxId || running.has(row.sandboxId)) return false;
    // The list was read before this session's turn: ask once more before forgetting the sandbox.
    const stillThere = await (await this.deps.nodes.forSandbox(row)).sandboxInfo(row.sandboxId).then(
      () => true,
      (err: unknown) => {
        if (isSpaceError(err) && err.code === ErrorCode.SANDBOX_NOT_FOUND) return false;
        throw err;
      },
    );
    if (stillThere) return false;
    await this.deps.sessions.forgetSandbox(row, row.sandboxId, 'lost');
    this.reconciled(row, `its sandbox ${row.sandboxId} is no longer running on the node`);
    return true;
  }

  private reconciled(row: SessionRow, why: string): void {
    this.deps.metrics.inc('sessions_reconciled');
    this.deps.log(`session ${row.id}: ${why}; marked stopped (the next call resumes it)`);
  }

  /** Milliseconds since `newest` (a checkpoint's creation time, if any), `row`'s sandbox start, or `also`. */
  private since(row: SessionRow, newest: string | undefined, also = 0): number {
    const last = Math.max(newest ? Date.parse(newest) : 0, Date.parse(row.sandboxStartedAt ?? row.createdAt), also);
    return this.now() - last;
  }

  private async checkpointDue(row: SessionRow): Promise<boolean> {
    if (row.checkpointIntervalSec <= 0) return false;
    const newest = (await this.deps.store.listCheckpoints(row.id)).at(-1);
    return this.since(row, newest?.createdAt, this.unchangedAt.get(row.id)) >= row.checkpointIntervalSec * 1000;
  }

  /** Whether the volume was written since the newest checkpoint; when it was not, the interval starts again from now. */
  private async changedSinceNewest(row: SessionRow): Promise<boolean> {
    const newest = (await this.deps.store.listCheckpoints(row.id)).at(-1);
    if (!newest || (await (await this.deps.nodes.forVolume(row)).volumeChanged(row.id, newest.id))) return true;
    this.unchangedAt.set(row.id, this.now());
    this.deps.metrics.inc('checkpoints_skipped_unchanged');
    return false;
  }

  /**
   * Whether processes run in the session's sandbox, which is what a full checkpoint saves beyond the
   * files: without any, the fs checkpoint suffices and the full one is not due again for an interval.
   */
  private async processesRun(row: SessionRow): Promise<boolean> {
    if (await this.hasRunningProcess(row)) return true;
    this.fullAttempts.set(row.id, this.now());
    return false;
  }

  /**
   * Every `fullCheckpointIntervalSec`, and sooner while the volume is written since the newest
   * checkpoint (what a resume would roll back grows): as often as the newest full checkpoint's pause
   * allows within `fullCheckpointPauseShare` of the sandbox's time, never more than every 10 s.
   */
  private async fullCheckpointDue(row: SessionRow): Promise<boolean> {
    if (row.fullCheckpointIntervalSec <= 0) return false;
    const newestFull = (await this.deps.store.listCheckpoints(row.id)).filter((c) => c.kind === 'full').at(-1);
    const since = this.since(row, newestFull?.createdAt, this.fullAttempts.get(row.id));
    if (since >= row.fullCheckpointIntervalSec * 1000) return true;
    if (!newestFull?.pauseMs) return false;
    const busyIntervalMs = Math.max(minBusyFullIntervalMs, newestFull.pauseMs / this.deps.fullCheckpointPauseShare);
    return since >= busyIntervalMs && (await this.changedSinceNewest(row));
  }

  private idle(row: SessionRow): boolean {
    return row.idleTimeoutSec > 0 && this.idleForMs(row) >= row.idleTimeoutSec * 1000;
  }

  /** Since the session was last used through any control plane, its sandbox started, or an idle stop was last given up. */
  private idleForMs(row: SessionRow): number {
    const lastUse = Math.max(
      this.deps.activity.lastUsedAt(row.id) ?? 0,
      row.lastActiveAt ? Date.parse(row.lastActiveAt) : 0,
      Date.parse(row.sandboxStartedAt ?? row.createdAt),
      this.idleRefusals.get(row.id) ?? 0,
    );
    return this.now() - lastUse;
  }

  /** Takes an automatic checkpoint and prunes old ones; returns the kind actually taken. */
  private async autoCheckpoint(row: SessionRow, kind: CheckpointKind): Promise<CheckpointKind> {
    let taken = kind;
    if (kind === 'full') this.fullAttempts.set(row.id, this.now());
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
    const { processes, untracked } = await (await this.deps.nodes.forSandbox(row)).processes(row.sandboxId!);
    return processes.some((p) => p.running) || (untracked ?? 0) > 0;
  }

  private async stopIdle(row: SessionRow): Promise<void> {
    const taken = await this.autoCheckpoint(row, 'full');
    if (taken !== 'full' && (await this.hasRunningProcess(row))) {
      this.idleRefusals.set(row.id, this.now());
      this.deps.log(`session ${row.id} is idle but keeps its sandbox: its processes cannot be saved in a full checkpoint now`);
      return;
    }
    // A call may have arrived (here or through another control plane) while the checkpoint was taken: then the session is not idle after all.
    const current = await this.deps.store.getSession(row.tenantId, row.id);
    if (!current || this.deps.activity.busy(row.id) || this.idleForMs(current) < row.idleTimeoutSec * 1000) return;
    await (await this.deps.nodes.forSandbox(row)).stopSandbox(row.sandboxId!);
    await this.deps.sessions.markIdle(row, row.sandboxId!);
    this.deps.metrics.inc('idle_stops');
    this.deps.log(`session ${row.id} idle for ${row.idleTimeoutSec} s: took a ${taken} checkpoint and stopped its sandbox`);
  }
}
