import { ErrorCode, isSpaceError } from '@space/protocol';
import { eachAtMost, warnWhileWaiting } from '@space/server-kit';
import type { SessionCheckpointService } from '../sessions/session-checkpoint-service.js';
import type { Activity } from '../sessions/activity.js';
import type { ControlPlaneRoster } from '../cluster/control-plane-roster.js';
import type { LifecycleQueue } from '../sessions/lifecycle-queue.js';
import type { Metrics } from '../metrics/metrics.js';
import type { UsageCollector } from '../usage/usage-collector.js';
import type { TemplateBuilds } from '../builds/template-builds.js';
import { type NodeDirectory, nodesAskedAtOnce } from '../cluster/node-directory.js';
import type { CheckpointShipper } from '../checkpoints/checkpoint-shipper.js';
import type { LeftVolumes } from '../sessions/left-volumes.js';
import type { SessionService } from '../sessions/session-service.js';
import type { SessionPauser } from '../sessions/session-pauser.js';
import type { SessionRow, Store } from '../store/store.js';
import { ClusterSweeps } from './cluster-sweeps.js';
import { type Snapshot, readSnapshot } from './pass-snapshot.js';
import { type OnNode, SessionUpkeep, looksAtCheckpoints } from './session-upkeep.js';
import { VisitSchedules } from './visit-schedules.js';

export interface MaintenanceDeps {
  store: Store;
  /** The control planes sharing the store: each maintains the nodes of its share and the sessions on them. */
  roster: Pick<ControlPlaneRoster, 'owns'>;
  /** Rescues volumes sessions left on lost nodes that answer again. */
  leftVolumes: LeftVolumes;
  nodes: NodeDirectory;
  shipper: CheckpointShipper;
  sessions: SessionService;
  checkpoints: SessionCheckpointService;
  pauser: SessionPauser;
  activity: Activity;
  lifecycle: LifecycleQueue;
  /** Dockerfile builds: those whose control plane died are failed here. */
  builds: Pick<TemplateBuilds, 'failStale'>;
  /** Meters the tenants' checkpoint storage (the nodes' own measurements come with their heartbeats: `NodeHeartbeats`). */
  usage: Pick<UsageCollector, 'meterCheckpointStorage'>;
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

/** A look at a session without its turn: true when it found nothing to do (and recorded when the next visit is due), false when something must be done in its turn. */
type Look = (row: SessionRow, onNode: OnNode) => Promise<boolean>;

/**
 * How often calls waiting on silent nodes are looked at, and how long a node must have answered
 * none of them: a call waiting on a node found lost ends within this of its loss.
 */
const callWatchMs = 1000;

/** A pass that takes longer (three ticks of the default 5 s) is logged with its phases, and again each time as long again while it goes on. */
const slowPassSec = 15;

/**
 * The periodic pass of a control plane: the cluster-wide sweeps (`ClusterSweeps`; the slow ones, once
 * a minute, beside the passes), then each session of its share (`ControlPlaneRoster`: the control
 * planes split the nodes, and each takes the sessions on its nodes, so it asks only its nodes what
 * they run) that something is due for, in its turn of its lifecycle queue (a session busy with its
 * own operation is left for the next pass), where `SessionUpkeep` carries out what the pure
 * `sessionDue` policy says is due: reconciliation, expiry, idle stop, automatic checkpoints. Each
 * visit records when the session's next one is due (`nextDueAt`), so a pass reads and visits only
 * the sessions due, not every one with a sandbox.
 */
export class Maintenance {
  private timer: NodeJS.Timeout | null = null;
  private callWatch: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private sweeping: Promise<void> | null = null;
  private readonly sweeps: ClusterSweeps;
  private readonly upkeep: SessionUpkeep;
  private readonly snapshotDeps: Parameters<typeof readSnapshot>[0];
  /** Live nodes whose sandbox list failed, said once until they answer again. */
  private readonly unlisted = new Set<string>();

  constructor(private readonly deps: MaintenanceDeps) {
    const now = deps.now ?? Date.now;
    this.sweeps = new ClusterSweeps({ ...deps, now });
    this.upkeep = new SessionUpkeep({ ...deps, now });
    this.snapshotDeps = { nodes: deps.nodes, store: deps.store, now };
  }

  start(tickMs: number): void {
    // A pass that fails as a whole (the database is away) is logged; the next tick tries again.
    this.timer = setInterval(() => void this.tick().catch((err: Error) => this.deps.log(`maintenance pass failed: ${err.message}`)), tickMs);
    this.timer.unref();
    this.callWatch = setInterval(() => void this.cutCallsToLostNodes(), Math.min(tickMs, callWatchMs));
    this.callWatch.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.callWatch) clearInterval(this.callWatch);
    this.timer = null;
    this.callWatch = null;
    await Promise.all([this.running, this.sweeping]);
  }

  /**
   * One pass over the sessions and, beside it, the slow sweeps when their minute came; resolves
   * when both are done.
   */
  tick(): Promise<void> {
    this.startSweeps();
    return Promise.all([this.startPass(), this.sweeping]).then(() => undefined);
  }

  /**
   * Every `callWatchMs`, whatever the pass is doing: calls waiting on nodes found lost end
   * (`NodeDirectory.cutCallsToLost`), so the operations that made them give the sessions' turns
   * back and the sessions can move. Only nodes that have answered nothing for that long are read.
   */
  private async cutCallsToLostNodes(): Promise<void> {
    // On the calls' connections: the pass may hold every background one, and this is one read.
    const cut = await this.deps.nodes.cutCallsToLost(callWatchMs).catch((err: Error) => {
      this.deps.log(`calls to lost nodes not looked at: ${err.message}`);
      return new Map<string, number>();
    });
    for (const [nodeId, calls] of cut) this.deps.log(`node ${nodeId} is lost: ended ${calls} call(s) waiting for its answer`);
  }

  /**
   * The once-a-minute sweeps, unless under way, on the background connections (never behind the
   * calls'). A pass never waits for them: their garbage collection asks every node (a survivor of a
   * control plane killed at 5,000 sessions spent 37 s in them while 830 sessions came due), and the
   * sessions due are what a pass must reach within its tick.
   */
  private startSweeps(): void {
    this.sweeping ??= this.deps.store
      .background(() => this.sweeps.slowSweeps())
      .catch((err: Error) => this.deps.log(`slow sweeps failed: ${err.message}`))
      .finally(() => (this.sweeping = null));
  }

  /** A pass over the sessions, or the one under way (passes never overlap), on the background connections. */
  private startPass(): Promise<void> {
    this.running ??= this.deps.store.background(() => this.pass()).finally(() => (this.running = null));
    return this.running;
  }

  private async pass(): Promise<void> {
    const started = performance.now();
    const phases: string[] = [];
    let at = started;
    let current = '';
    const phase = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
      current = name;
      const result = await work();
      phases.push(`${name} ${Math.round(performance.now() - at)} ms`);
      at = performance.now();
      return result;
    };
    // A long pass holds up every automatic checkpoint and idle stop: said while it goes on (where it is) and when it ends (where the time went).
    const sessions = await warnWhileWaiting(
      () => this.passPhases(phase),
      slowPassSec * 1000,
      (sec) => this.deps.log(`maintenance pass still running after ${sec} s, in ${current || 'its start'}: ${phases.join(', ') || 'no phase done'}`),
    );
    const seconds = (performance.now() - started) / 1000;
    this.deps.metrics.observeMaintenancePass(seconds, sessions);
    if (seconds > slowPassSec) this.deps.log(`maintenance pass took ${seconds.toFixed(1)} s: ${phases.join(', ')}`);
  }

  /** The pass's work, phase by phase; returns how many sessions it visited. */
  private async passPhases(phase: <T>(name: string, work: () => Promise<T>) => Promise<T>): Promise<number> {
    await phase('open calls', () => this.deps.activity.recordOpenCalls());
    await phase('checkpoint storage', () => this.deps.usage.meterCheckpointStorage());
    await phase('shipments', () => this.sweeps.takeOverShipments());
    // The nodes of this control plane's share, and the sessions on them (those on no node by their own id).
    const owns = (nodeId: string) => this.deps.roster.owns(nodeId);
    const snapshot = await phase('nodes listed', () => readSnapshot(this.snapshotDeps, owns));
    this.noteUnlisted(snapshot);
    await phase('moved and left', async () => {
      await this.sweeps.fenceMovedSessions(snapshot.listed, snapshot.placedOn);
      await this.sweeps.rescueLeftVolumes(snapshot.listed);
    });
    const ours = snapshot.sessions.filter((row) => owns(row.nodeId ?? row.volumeNodeId ?? row.id));
    // What the looks go by, read for all of them at once (a look read its own: a statement per visit).
    const looked = ours.filter(looksAtCheckpoints).map((row) => row.id);
    const newest = await phase('checkpoints read', () => this.deps.store.listNewestCheckpoints(looked));
    const schedules = new VisitSchedules(this.deps.store, this.deps.log);
    const look: Look = async (row, onNode) => {
      const next = await this.upkeep.look(row, onNode, newest.get(row.id) ?? []);
      if (next !== null) schedules.add({ id: row.id, at: next, basis: row });
      return next !== null;
    };
    await phase(`${ours.length} sessions`, async () => {
      try {
        await this.eachSession(snapshot.running, ours, (row, onNode) => this.upkeepAndSchedule(row, onNode, schedules), look);
      } finally {
        await schedules.flush();
      }
    });
    return ours.length;
  }

  /**
   * Says once when a live node (it beats) does not list its sandboxes, and when it lists them again:
   * meanwhile no pass maintains its sessions (no automatic checkpoint, idle stop or timeout).
   */
  private noteUnlisted({ listed, unlisted }: Snapshot): void {
    for (const [nodeId, why] of unlisted)
      if (!this.unlisted.has(nodeId)) {
        this.unlisted.add(nodeId);
        this.deps.log(`node ${nodeId} did not list its sandboxes: ${why}; its sessions are not maintained until it does`);
      }
    for (const nodeId of this.unlisted)
      if (listed.has(nodeId)) {
        this.unlisted.delete(nodeId);
        this.deps.log(`node ${nodeId} lists its sandboxes again; its sessions are maintained`);
      }
  }

  /** Only the reconciliation, for every session: run before the control plane serves its first call. */
  async reconcileAll(): Promise<void> {
    const { running, sessions } = await readSnapshot(this.snapshotDeps);
    await this.eachSession(running, sessions, (row, onNode) => this.upkeep.reconcileOnly(row, onNode));
  }

  /** Everything due for the session, then when its next visit is due (recorded with the pass's others, unless its row changed meanwhile). */
  private async upkeepAndSchedule(row: SessionRow, onNode: OnNode, schedules: VisitSchedules): Promise<void> {
    const next = await this.upkeep.upkeep(row, onNode);
    if (next !== null) schedules.add({ id: row.id, at: next, basis: row });
  }

  /**
   * Runs `work` on each session in its turn of the session's queue, with the sandboxes its node runs.
   * A session busy with its own operation is skipped (the next pass comes soon), and so is one whose
   * node did not answer (or is lost). One with calls or streams open is not: a session in use all
   * the time (an open terminal, back-to-back execs) is the one whose checkpoints matter most.
   */
  private async eachSession(
    running: Map<string, OnNode>,
    sessions: SessionRow[],
    work: (row: SessionRow, onNode: OnNode) => Promise<void>,
    look?: Look,
  ): Promise<void> {
    // Nodes side by side, each node's sessions one after another (a node is asked one thing of
    // this pass at a time, as with one node): a slow node or a long automatic checkpoint holds up
    // the sessions of its node, not the pass.
    const byNode = new Map<string, SessionRow[]>();
    for (const s of sessions) {
      const node = s.nodeId ?? s.volumeNodeId ?? '';
      const group = byNode.get(node);
      if (group) group.push(s);
      else byNode.set(node, [s]);
    }
    await eachAtMost([...byNode.values()], nodesAskedAtOnce, async (ofNode) => {
      for (const session of ofNode) await this.maintainOne(session, running, work, look);
    });
  }

  /**
   * `work` on one session in its lifecycle turn, unless it is busy or its node did not answer; with
   * `look`, only when a look without its turn finds something to do (no lease, no second read otherwise).
   */
  private async maintainOne(
    session: SessionRow,
    running: Map<string, OnNode>,
    work: (row: SessionRow, onNode: OnNode) => Promise<void>,
    look?: Look,
  ): Promise<void> {
    const { id, tenantId, nodeId, volumeNodeId } = session;
    if (this.deps.lifecycle.busyHere(id)) return;
    const onNode = running.get(nodeId ?? volumeNodeId ?? '');
    if (!onNode) return;
    try {
      if (look && (await look(session, onNode))) return;
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
      if (isSpaceError(err) && err.code === ErrorCode.SESSION_BUSY) return;
      this.deps.metrics.inc('checkpoint_failures');
      this.deps.log(`maintenance of ${id}: ${(err as Error).message}`);
    }
  }
}
