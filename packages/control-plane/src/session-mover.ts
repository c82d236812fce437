import { ErrorCode, SpaceError, isSpaceError } from '@space/protocol';
import type { CheckpointShipper } from './checkpoint-shipper.js';
import type { Metrics } from './metrics.js';
import type { NodeClient } from './node-client.js';
import type { NodeDirectory } from './node-directory.js';
import type { CheckpointTaker } from './checkpoint-taker.js';
import type { CheckpointRow, SessionRow, Store } from './store/store.js';

export interface SessionMoverDeps {
  store: Store;
  nodes: NodeDirectory;
  shipper: CheckpointShipper;
  taker: CheckpointTaker;
  metrics: Metrics;
  log: (message: string) => void;
}

/** Object-store failures that make one checkpoint unusable, not the move: the next older one is tried. */
const unusableObject = new Set<string>([ErrorCode.OBJECT_NOT_FOUND, ErrorCode.OBJECT_CORRUPT]);

/**
 * Sessions leaving their node, in their lifecycle turn. One whose node is lost goes on on another
 * node from its newest shipped checkpoint, fetched there (a full checkpoint's memory image comes
 * along); a checkpoint whose objects are missing or do not read back whole is skipped for the next
 * older one. One whose node is drained moves with an fs checkpoint of everything it wrote. Either
 * way the session's history says from where to where, and from which checkpoint.
 */
export class SessionMover {
  constructor(private readonly deps: SessionMoverDeps) {}

  /** Moves the session if the node holding its volume is lost; the moved row and what its history should tell, or null when it stays. */
  async moveIfLost(row: SessionRow): Promise<{ row: SessionRow; note: string } | null> {
    const from = row.volumeNodeId;
    if (!from || !(await this.deps.nodes.isLost(from))) return null;
    refuseWithVolumes(row, `node ${from}, which holds it, is lost`);
    if (!this.deps.shipper.enabled)
      throw new SpaceError(
        ErrorCode.NODE_UNAVAILABLE,
        `node ${from}, which holds session ${row.id}, is lost; without an object store (SPACE_OBJECT_STORE) the session waits for it to come back`,
      );
    const shipped = (await this.deps.store.listCheckpoints(row.id)).filter((c) => c.shippedAt).reverse();
    if (shipped.length === 0)
      throw new SpaceError(
        ErrorCode.NODE_UNAVAILABLE,
        `node ${from}, which holds session ${row.id}, is lost, and none of its checkpoints reached the object store`,
      );
    return this.relocate(row, await this.deps.nodes.place(), shipped, `node ${from} was lost`, true);
  }

  /**
   * Moves the session off its node, which is being drained: its sandbox stops, an fs checkpoint
   * holds everything it wrote, and that is shipped and becomes its volume on another node (its next
   * call starts a sandbox there). Its volume on the drained node is deleted once it is safe in the
   * object store. Runs in the session's lifecycle turn.
   */
  async moveOff(row: SessionRow): Promise<{ row: SessionRow; note: string }> {
    refuseWithVolumes(row, 'its node is being drained');
    if (!this.deps.shipper.enabled)
      throw new SpaceError(ErrorCode.OBJECT_STORE_UNAVAILABLE, 'draining a node moves its sessions through the object store: set SPACE_OBJECT_STORE');
    const from = await this.deps.nodes.forVolume(row);
    // Where it goes is found first: with no node to take it, the session is left as it was.
    const to = await this.deps.nodes.place();
    if (row.sandboxId) {
      await (await this.deps.nodes.forSandbox(row)).stopSandbox(row.sandboxId);
      await this.deps.store.recordSandboxEnd(row.sandboxId, 'moved');
      await this.deps.store.updateSession(row.id, { status: 'stopped', sandboxId: null, nodeId: null, sandboxStartedAt: null });
    }
    const taken = await this.deps.taker.take(row, 'fs', 'auto');
    await this.deps.shipper.ship(taken);
    const checkpoint = await this.deps.store.getCheckpoint(row.tenantId, taken.id);
    if (!checkpoint?.shippedAt)
      throw new SpaceError(ErrorCode.OBJECT_STORE_UNAVAILABLE, `checkpoint ${taken.id} of session ${row.id} did not reach the object store`);
    const moved = await this.relocate({ ...row, sandboxId: null }, to, [checkpoint], `node ${from.nodeId} was drained`, false);
    await from.deleteVolume(row.id).catch((err: Error) => this.deps.log(`volume of moved session ${row.id} left on node ${from.nodeId}: ${err.message}`));
    return moved;
  }

  /** Fetches the newest of `candidates` that reads back whole onto another node and makes it the session's volume there. */
  private async relocate(
    row: SessionRow,
    to: NodeClient,
    candidates: CheckpointRow[],
    why: string,
    newerStayBehind: boolean,
  ): Promise<{ row: SessionRow; note: string }> {
    const from = row.volumeNodeId;
    const skipped: string[] = [];
    for (const checkpoint of candidates) {
      try {
        await this.deps.shipper.bringTo(to, checkpoint);
      } catch (err) {
        if (!isSpaceError(err) || !unusableObject.has(err.code)) throw err;
        skipped.push(`${checkpoint.id} (${err.message})`);
        continue;
      }
      await to.restoreVolume(row.id, checkpoint.id);
      if (row.sandboxId) await this.deps.store.recordSandboxEnd(row.sandboxId, 'lost');
      const patch = { volumeNodeId: to.nodeId, status: 'stopped' as const, sandboxId: null, nodeId: null, sandboxStartedAt: null };
      await this.deps.store.updateSession(row.id, patch);
      this.deps.metrics.inc('sessions_moved');
      const note = [
        `${why}: the session moved to node ${to.nodeId} from ${checkpoint.id} of ${checkpoint.createdAt}${newerStayBehind ? ` (what was written after it stayed on ${from})` : ''}`,
        ...(skipped.length ? [`skipped as unreadable: ${skipped.join('; ')}`] : []),
      ].join('; ');
      this.deps.log(`session ${row.id}: ${note}`);
      return { row: { ...row, ...patch }, note };
    }
    throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, `${why} and no shipped checkpoint of session ${row.id} could be read: ${skipped.join('; ')}`);
  }
}

/** A session that mounts volumes stays with them: they are on its node only (not in the object store). */
function refuseWithVolumes(row: SessionRow, why: string): void {
  if (row.volumes.length > 0)
    throw new SpaceError(
      ErrorCode.VOLUME_UNAVAILABLE,
      `session ${row.id} cannot move (${why}): it mounts volumes (${row.volumes.map((v) => v.name).join(', ')}), which live on its node and do not move`,
    );
}
