import type { SandboxInfo } from '@space/protocol';
import type { ControlPlaneRoster } from '../cluster/control-plane-roster.js';
import type { SessionCheckpointService } from '../sessions/session-checkpoint-service.js';
import type { LeftVolumes } from '../sessions/left-volumes.js';
import type { TemplateBuilds } from '../builds/template-builds.js';
import type { NodeClient } from '../cluster/node-client.js';
import { type NodeDirectory, mayRunOn } from '../cluster/node-directory.js';
import type { CheckpointShipper } from '../checkpoints/checkpoint-shipper.js';
import type { SessionRow, Store } from '../store/store.js';

export interface ClusterSweepDeps {
  store: Pick<Store, 'deleteExpiredIdempotencyKeys'>;
  nodes: NodeDirectory;
  shipper: CheckpointShipper;
  checkpoints: SessionCheckpointService;
  leftVolumes: LeftVolumes;
  /** Dockerfile builds: those whose control plane died are failed here. */
  builds: Pick<TemplateBuilds, 'failStale'>;
  /** The control planes sharing the store: each asks the nodes of its share. */
  roster: Pick<ControlPlaneRoster, 'owns'>;
  log: (message: string) => void;
  now: () => number;
}

/** What each node that answered runs, by node id. */
export type ListedSandboxes = Map<string, { node: NodeClient; sandboxes: SandboxInfo[] }>;

/** Where the volume of each listed sandbox's session is, by session id (a session that no longer exists is missing). */
export type PlacedOn = Map<string, Pick<SessionRow, 'volumeNodeId'>>;

/** Unrecorded checkpoints are swept this often, once older than the grace period. */
const orphanSweepEveryMs = 60_000;
const orphanGraceMs = 60_000;

/**
 * The maintenance that looks at the cluster rather than at one session's policy: checkpoints the
 * store does not know or that were not shipped, unused ship bases, expired idempotency keys, builds
 * whose control plane died, sandboxes of sessions that moved off a node that came back, and volumes
 * sessions left on a node that was lost. (What a node says in its heartbeat, lost egress settings
 * and usage to collect, is followed up by `NodeHeartbeats`.)
 */
export class ClusterSweeps {
  private lastSlowSweep = 0;

  constructor(private readonly deps: ClusterSweepDeps) {}

  /** Shipments whose control plane died with them under way: taken over at once, not at the minute's retry. */
  async takeOverShipments(): Promise<void> {
    const taken = await this.deps.shipper.takeOverAbandoned().catch(() => 0);
    if (taken) this.deps.log(`shipping ${taken} checkpoint(s) whose shipment another control plane left unfinished`);
  }

  /** The sweeps that need not run every pass: once a minute. */
  async slowSweeps(): Promise<void> {
    const now = this.deps.now();
    if (now - this.lastSlowSweep < orphanSweepEveryMs) return;
    this.lastSlowSweep = now;
    const removed = await this.deps.checkpoints.removeOrphans(orphanGraceMs, (nodeId) => this.deps.roster.owns(nodeId)).catch(() => 0);
    if (removed) this.deps.log(`removed ${removed} checkpoint(s) the store does not know`);
    const shipped = await this.deps.shipper.retryUnshipped(orphanGraceMs);
    if (shipped) this.deps.log(`shipped ${shipped} checkpoint(s) an earlier attempt did not`);
    await this.deps.shipper
      .collectBases((baseId) => this.deps.roster.owns(baseId))
      .catch((err: Error) => this.deps.log(`unused ship bases not collected: ${err.message}`));
    await this.deps.store.deleteExpiredIdempotencyKeys(now).catch((err: Error) => this.deps.log(`expired idempotency keys not deleted: ${err.message}`));
    const failed = await this.deps.builds.failStale(now).catch(() => 0);
    if (failed) this.deps.log(`failed ${failed} template build(s) whose control plane stopped`);
  }

  /**
   * A node that comes back after it was lost may still run sandboxes of sessions that moved to
   * another node meanwhile (or were deleted): they are stopped there, so a session never runs
   * twice. Their files stay on that node.
   */
  async fenceMovedSessions(listed: ListedSandboxes, placedOn: PlacedOn): Promise<void> {
    for (const { node, sandboxes } of listed.values()) {
      for (const sandbox of sandboxes) {
        const row = placedOn.get(sandbox.sessionId) ?? null;
        if (mayRunOn(row, node.nodeId)) continue;
        await node.stopSandbox(sandbox.sandboxId).catch(() => undefined);
        this.deps.log(
          `stopped sandbox ${sandbox.sandboxId} on node ${node.nodeId}: session ${sandbox.sessionId} ${row ? `moved to node ${row.volumeNodeId}` : 'no longer exists'}`,
        );
      }
    }
  }

  /** Volumes sessions left on lost nodes that answer again are rescued (see LeftVolumes). */
  rescueLeftVolumes(listed: ListedSandboxes): Promise<void> {
    return this.deps.leftVolumes.sweep((nodeId) => listed.get(nodeId)?.node);
  }
}
