import { ProcessListSchema } from '@space/protocol';
import type { CheckpointService } from './checkpoint-service.js';
import type { Activity } from './activity.js';
import type { Metrics } from './metrics.js';
import type { NodeClient } from './node-client.js';
import type { SessionService } from './session-service.js';
import type { SessionRow, Store } from './store/store.js';

export interface MaintenanceDeps {
  store: Store;
  node: NodeClient;
  sessions: SessionService;
  checkpoints: CheckpointService;
  activity: Activity;
  metrics: Metrics;
  log: (message: string) => void;
  /** Automatic checkpoints kept per session; older ones are deleted (manual ones never are). */
  keepAutomatic: number;
  now?: () => number;
}

/**
 * The periodic work on running sessions: automatic filesystem checkpoints every
 * `checkpointIntervalSec`, retention of the last `keepAutomatic` of them, and stopping sandboxes
 * idle for `idleTimeoutSec` after a final checkpoint. A sandbox with a running process is never
 * stopped as idle: without memory checkpoints its processes would not come back.
 */
export class Maintenance {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly now: () => number;

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
    for (const row of this.deps.store.listAllSessions()) {
      if (row.status !== 'running' || !row.sandboxId || this.deps.activity.busy(row.id)) continue;
      try {
        if (await this.idle(row)) await this.stopIdle(row);
        else if (this.checkpointDue(row)) await this.autoCheckpoint(row);
      } catch (err) {
        this.deps.metrics.inc('checkpoint_failures');
        this.deps.log(`maintenance of ${row.id}: ${(err as Error).message}`);
      }
    }
  }

  private checkpointDue(row: SessionRow): boolean {
    if (row.checkpointIntervalSec === 0) return false;
    const last = this.deps.store.listCheckpoints(row.id).at(-1)?.createdAt ?? row.sandboxStartedAt ?? row.createdAt;
    return this.now() - Date.parse(last) >= row.checkpointIntervalSec * 1000;
  }

  private async idle(row: SessionRow): Promise<boolean> {
    if (row.idleTimeoutSec === 0) return false;
    const since = Date.parse(row.sandboxStartedAt ?? row.createdAt);
    if (this.deps.activity.idleFor(row.id, since) < row.idleTimeoutSec * 1000) return false;
    const { processes } = await this.deps.node.upstream.json('GET', this.deps.node.sandboxPath(row.sandboxId!, '/processes'), undefined, ProcessListSchema);
    return !processes.some((p) => p.running);
  }

  private async autoCheckpoint(row: SessionRow): Promise<void> {
    const caller = { tenantId: row.tenantId, admin: false };
    await this.deps.checkpoints.create(caller, row.id, 'auto');
    await this.deps.checkpoints.prune(row.id, this.deps.keepAutomatic);
  }

  private async stopIdle(row: SessionRow): Promise<void> {
    await this.autoCheckpoint(row);
    // A call may have arrived while the checkpoint was taken: then the session is not idle after all.
    if (this.deps.activity.busy(row.id) || this.deps.activity.idleFor(row.id, 0) < row.idleTimeoutSec * 1000) return;
    await this.deps.node.stopSandbox(row.sandboxId!);
    this.deps.sessions.forgetSandbox(row, row.sandboxId!, 'idle');
    this.deps.store.updateSession(row.id, { status: 'idle' });
    this.deps.metrics.inc('idle_stops');
    this.deps.log(`session ${row.id} idle for ${row.idleTimeoutSec} s: checkpointed and stopped its sandbox`);
  }
}
