import { ProcessListSchema, isSpaceError, type CheckpointKind } from '@space/protocol';
import type { CheckpointService } from './checkpoint-service.js';
import type { Activity } from './activity.js';
import type { Metrics } from './metrics.js';
import type { NodeClient } from './node-client.js';
import type { SessionService } from './session-service.js';
import type { EgressService } from './egress-service.js';
import type { SessionRow, Store } from './store/store.js';

export interface MaintenanceDeps {
  store: Store;
  node: NodeClient;
  sessions: SessionService;
  checkpoints: CheckpointService;
  activity: Activity;
  egress: EgressService;
  metrics: Metrics;
  log: (message: string) => void;
  /** Automatic checkpoints kept per session; older ones are deleted (manual ones never are). */
  keepAutomatic: number;
  now?: () => number;
}

/** Unrecorded checkpoints are swept this often, once older than the grace period. */
const orphanSweepEveryMs = 60_000;
const orphanGraceMs = 60_000;

/**
 * The periodic work on running sessions: automatic fs checkpoints every `checkpointIntervalSec`,
 * full ones every `fullCheckpointIntervalSec`, retention of the last `keepAutomatic` of each kind,
 * and stopping sandboxes idle for `idleTimeoutSec` (no call, no foreground command) after a full
 * checkpoint, so their processes come back on the next call. When the full checkpoint is refused
 * (fs taken instead) and processes run, the sandbox keeps running: stopping it would lose them.
 */
export class Maintenance {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly now: () => number;
  /** When a full checkpoint was last tried per session: a refused one is not retried every tick. */
  private readonly fullAttempts = new Map<string, number>();
  /** When an idle stop was last given up per session (full refused, processes running). */
  private readonly idleRefusals = new Map<string, number>();
  private lastOrphanSweep = 0;

  constructor(private readonly deps: MaintenanceDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(tickMs: number): void {
    this.timer = setInterval(() => void this.tick(), tickMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One pass over the running sessions; passes never overlap. */
  tick(): Promise<void> {
    if (!this.running) this.running = this.pass().finally(() => (this.running = null));
    return this.running;
  }

  private async pass(): Promise<void> {
    // A node agent that restarted under running sandboxes lost their egress settings (memory only).
    const health = await this.deps.node.health().catch(() => null);
    if (health?.egressUnconfigured.length) await this.deps.egress.repairNode(health.egressUnconfigured);
    if (this.now() - this.lastOrphanSweep >= orphanSweepEveryMs) {
      this.lastOrphanSweep = this.now();
      const removed = await this.deps.checkpoints.removeOrphans(orphanGraceMs).catch(() => 0);
      if (removed) this.deps.log(`removed ${removed} checkpoint(s) the store does not know`);
    }
    for (const row of this.deps.store.listAllSessions()) {
      if (row.status !== 'running' || !row.sandboxId || this.deps.activity.busy(row.id)) continue;
      try {
        if (this.idle(row)) await this.stopIdle(row);
        else if (this.fullCheckpointDue(row)) await this.autoCheckpoint(row, 'full');
        else if (this.checkpointDue(row)) await this.autoCheckpoint(row, 'fs');
      } catch (err) {
        this.deps.metrics.inc('checkpoint_failures');
        this.deps.log(`maintenance of ${row.id}: ${(err as Error).message}`);
      }
    }
  }

  /** Milliseconds since `row`'s newest checkpoint (of `kind`, or any), its sandbox start, or `also`. */
  private sinceLast(row: SessionRow, kind: CheckpointKind | null, also = 0): number {
    const newest = this.deps.store.listCheckpoints(row.id).filter((c) => kind === null || c.kind === kind).at(-1)?.createdAt;
    const last = Math.max(newest ? Date.parse(newest) : 0, Date.parse(row.sandboxStartedAt ?? row.createdAt), also);
    return this.now() - last;
  }

  private checkpointDue(row: SessionRow): boolean {
    return row.checkpointIntervalSec > 0 && this.sinceLast(row, null) >= row.checkpointIntervalSec * 1000;
  }

  private fullCheckpointDue(row: SessionRow): boolean {
    return row.fullCheckpointIntervalSec > 0 && this.sinceLast(row, 'full', this.fullAttempts.get(row.id)) >= row.fullCheckpointIntervalSec * 1000;
  }

  private idle(row: SessionRow): boolean {
    if (row.idleTimeoutSec === 0) return false;
    const since = Date.parse(row.sandboxStartedAt ?? row.createdAt);
    const idleFor = Math.min(this.deps.activity.idleFor(row.id, since), this.now() - (this.idleRefusals.get(row.id) ?? 0));
    return idleFor >= row.idleTimeoutSec * 1000;
  }

  /** Takes an automatic checkpoint and prunes old ones; returns the kind actually taken. */
  private async autoCheckpoint(row: SessionRow, kind: CheckpointKind): Promise<CheckpointKind> {
    const caller = { tenantId: row.tenantId, admin: false };
    let taken = kind;
    if (kind === 'full') this.fullAttempts.set(row.id, this.now());
    try {
      await this.deps.checkpoints.create(caller, row.id, kind, 'auto');
    } catch (err) {
      if (!isSpaceError(err) || !err.details?.fallbackCheckpointId) throw err;
      this.deps.log(`session ${row.id}: ${err.message}`);
      taken = 'fs';
    }
    await this.deps.checkpoints.prune(row.id, this.deps.keepAutomatic);
    return taken;
  }

  private async hasRunningProcess(row: SessionRow): Promise<boolean> {
    const { processes } = await this.deps.node.upstream.json('GET', this.deps.node.sandboxPath(row.sandboxId!, '/processes'), undefined, ProcessListSchema);
    return processes.some((p) => p.running);
  }

  private async stopIdle(row: SessionRow): Promise<void> {
    const taken = await this.autoCheckpoint(row, 'full');
    if (taken !== 'full' && (await this.hasRunningProcess(row))) {
      this.idleRefusals.set(row.id, this.now());
      this.deps.log(`session ${row.id} is idle but keeps its sandbox: its processes cannot be saved in a full checkpoint now`);
      return;
    }
    // A call may have arrived while the checkpoint was taken: then the session is not idle after all.
    if (this.deps.activity.busy(row.id) || this.deps.activity.idleFor(row.id, 0) < row.idleTimeoutSec * 1000) return;
    await this.deps.node.stopSandbox(row.sandboxId!);
    this.deps.sessions.forgetSandbox(row, row.sandboxId!, 'idle');
    this.deps.store.updateSession(row.id, { status: 'idle' });
    this.deps.metrics.inc('idle_stops');
    this.deps.log(`session ${row.id} idle for ${row.idleTimeoutSec} s: took a ${taken} checkpoint and stopped its sandbox`);
  }
}
