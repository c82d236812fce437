import { ErrorCode, isSpaceError, type SandboxInfo } from '@space/protocol';
import { eachAtMost } from '@space/server-kit';
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
import type { EgressService } from '../tenants/egress-service.js';
import type { SandboxClaim, SessionRow, Store } from '../store/store.js';
import { ClusterSweeps, type ListedSandboxes, type PlacedOn } from './cluster-sweeps.js';
import { type OnNode, SessionUpkeep } from './session-upkeep.js';
import { lookAfterWriteMs } from './session-policy.js';

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
  egress: EgressService;
  /** Dockerfile builds: those whose control plane died are failed here. */
  builds: Pick<TemplateBuilds, 'failStale'>;
  /** Brings the nodes' usage measurements into the store. */
  usage: UsageCollector;
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

/** What a pass works on (see `Maintenance.snapshot`). */
interface Snapshot {
  listed: ListedSandboxes;
  /** The sandboxes each node that answered runs. */
  running: Map<string, OnNode>;
  sessions: SessionRow[];
  placedOn: PlacedOn;
}

/** A look at a session without its turn: when its next visit is due, or null when something must be done in its turn. */
type Look = (row: SessionRow, onNode: OnNode) => Promise<number | null>;

/**
 * Whether the claimed sandbox, listed by its node, is no longer quiet while its next visit is
 * further away than a visit worked out while it was not quiet ever is: a look found it quiet and
 * put the visit off, and something has come in since.
 */
function writtenSinceQuiet(claim: SandboxClaim, listed: SandboxInfo | undefined, now: number): boolean {
  const within = lookAfterWriteMs(claim);
  return listed !== undefined && !listed.quietSince && within !== null && claim.maintainAfter !== null && claim.maintainAfter > now + within;
}

/** A pass that takes longer is logged with its phases. */
const slowPassSec = 60;

/**
 * The periodic pass of a control plane: the cluster-wide sweeps (`ClusterSweeps`), then each
 * session of its share (`ControlPlaneRoster`: the control planes split the nodes, and each takes
 * the sessions on its nodes, so it asks only its nodes what they run) that something is due for,
 * in its turn of its lifecycle queue (a session busy with its own operation is left for the next
 * pass), where `SessionUpkeep` carries out what the pure `sessionDue` policy says is due:
 * reconciliation, expiry, idle stop, automatic checkpoints. Each visit records when the session's
 * next one is due (`nextDueAt`), so a pass reads and visits only the sessions due, not every one
 * with a sandbox.
 */
export class Maintenance {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly sweeps: ClusterSweeps;
  private readonly upkeep: SessionUpkeep;
  private readonly now: () => number;

  constructor(private readonly deps: MaintenanceDeps) {
    const now = deps.now ?? Date.now;
    this.now = now;
    this.sweeps = new ClusterSweeps({ ...deps, now });
    this.upkeep = new SessionUpkeep({ ...deps, now });
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

  /** One pass over the sessions, its statements on the background connections (never behind the calls'); passes never overlap. */
  tick(): Promise<void> {
    if (!this.running) this.running = this.deps.store.background(() => this.pass()).finally(() => (this.running = null));
    return this.running;
  }

  private async pass(): Promise<void> {
    const started = performance.now();
    const phases: string[] = [];
    let at = started;
    const phase = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
      const result = await work();
      phases.push(`${name} ${Math.round(performance.now() - at)} ms`);
      at = performance.now();
      return result;
    };
    await phase('sweeps', async () => {
      await this.deps.activity.recordOpenCalls();
      await this.sweeps.repairEgress();
      await this.sweeps.collectUsage();
      await this.sweeps.takeOverShipments();
      await this.sweeps.slowSweeps();
    });
    // The nodes of this control plane's share, and the sessions on them (those on no node by their own id).
    const owns = (nodeId: string) => this.deps.roster.owns(nodeId);
    const snapshot = await phase('nodes listed', () => this.snapshot(owns));
    await phase('moved and left', async () => {
      await this.sweeps.fenceMovedSessions(snapshot.listed, snapshot.placedOn);
      await this.sweeps.rescueLeftVolumes(snapshot.listed);
    });
    const ours = snapshot.sessions.filter((row) => owns(row.nodeId ?? row.volumeNodeId ?? row.id));
    await phase(`${ours.length} sessions`, () =>
      this.eachSession(
        snapshot.running,
        ours,
        (row, onNode) => this.upkeepAndSchedule(row, onNode),
        (row, onNode) => this.upkeep.look(row, onNode),
      ),
    );
    const seconds = (performance.now() - started) / 1000;
    this.deps.metrics.observeMaintenancePass(seconds, ours.length);
    // A pass longer than a minute holds up every automatic checkpoint and idle stop: said, with where the time went.
    if (seconds > slowPassSec) this.deps.log(`maintenance pass took ${seconds.toFixed(1)} s: ${phases.join(', ')}`);
  }

  /** Only the reconciliation, for every session: run before the control plane serves its first call. */
  async reconcileAll(): Promise<void> {
    const { running, sessions } = await this.snapshot();
    await this.eachSession(running, sessions, (row, onNode) => this.upkeep.reconcileOnly(row, onNode));
  }

  /** Everything due for the session, then when its next visit is due, unless its row changed meanwhile. */
  private async upkeepAndSchedule(row: SessionRow, onNode: OnNode): Promise<void> {
    const next = await this.upkeep.upkeep(row, onNode);
    if (next !== null) await this.deps.store.scheduleMaintenance(row.id, next, row);
  }

  /**
   * What a pass works on, read in this order (a session is recorded before its sandbox starts, so
   * each listed sandbox's session is found if it exists):
   * - the sandboxes each live node (of those `ofNode` takes) runs; a node that does not answer is left out;
   * - the sessions something is due for (`listSessionsToMaintain`: a start under way, a timeout
   *   passed, a sandbox whose next visit came), however many others there are;
   * - which sandbox every session on those nodes records (`listSandboxClaims`, a narrow read),
   *   compared with the lists: a recorded sandbox its node did not list (gone?), a listed one its
   *   session does not record (moved? deleted?) and one no longer quiet whose next visit a quiet
   *   look put off (written again: `lookAfterWriteMs`) bring their sessions into the pass too.
   * `placedOn` holds, for every listed sandbox's session, where its volume is (for fencing).
   */
  private async snapshot(ofNode?: (nodeId: string) => boolean): Promise<Snapshot> {
    const listed: ListedSandboxes = new Map();
    const nodes = (await this.deps.nodes.live()).filter((node) => !ofNode || ofNode(node.nodeId));
    await Promise.all(
      nodes.map(async (node) => {
        const sandboxes = await node.listSandboxes().catch(() => null);
        if (sandboxes) listed.set(node.nodeId, { node, sandboxes });
      }),
    );
    const running = new Map([...listed].map(([nodeId, { sandboxes }]) => [nodeId, new Map(sandboxes.map((s) => [s.sandboxId, s]))]));
    const nodeIds = ofNode ? nodes.map((n) => n.nodeId) : undefined;
    const now = this.now();
    const due = await this.deps.store.listSessionsToMaintain(now, nodeIds);
    const claims = new Map((await this.deps.store.listSandboxClaims(nodeIds)).map((c) => [c.sessionId, c]));
    const gone = [...claims.values()].filter((c) => running.get(c.nodeId)?.has(c.sandboxId) === false).map((c) => c.sessionId);
    const unclaimed = [...listed].flatMap(([nodeId, { sandboxes }]) =>
      sandboxes.filter((s) => claims.get(s.sessionId)?.sandboxId !== s.sandboxId || claims.get(s.sessionId)?.nodeId !== nodeId).map((s) => s.sessionId),
    );
    const written = [...claims.values()].filter((c) => writtenSinceQuiet(c, running.get(c.nodeId)?.get(c.sandboxId), now)).map((c) => c.sessionId);
    const known = new Set(due.map((s) => s.id));
    const others = [...new Set([...gone, ...unclaimed, ...written])].filter((id) => !known.has(id));
    const sessions = [...due, ...(others.length ? await this.deps.store.findSessions(others) : [])];
    const placedOn: PlacedOn = new Map([...claims.values()].map((c) => [c.sessionId, { volumeNodeId: c.volumeNodeId }]));
    for (const row of sessions) placedOn.set(row.id, row);
    return { listed, running, sessions, placedOn };
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
   * `look`, only when a look without its turn finds something to do (else the look's next time is
   * recorded: no lease, no second read).
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
      const next = look ? await look(session, onNode) : null;
      if (next !== null) {
        await this.deps.store.scheduleMaintenance(id, next, session);
        return;
      }
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
