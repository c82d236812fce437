import { ErrorCode, SpaceError, isSpaceError } from '@space/protocol';
import type { CheckpointShipper } from '../checkpoints/checkpoint-shipper.js';
import type { Metrics } from '../metrics/metrics.js';
import type { NodeClient } from '../cluster/node-client.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { CheckpointTaker } from '../checkpoints/checkpoint-taker.js';
import type { CheckpointRow, SessionRow, Store } from '../store/store.js';
import type { EgressService } from '../tenants/egress-service.js';
import type { LeftVolumes } from './left-volumes.js';
import type { MovingVolumes } from './moving-volumes.js';
import { placeAnew, updatePlaced } from './placements.js';

export interface SessionMoverDeps {
  store: Store;
  nodes: NodeDirectory;
  shipper: CheckpointShipper;
  taker: CheckpointTaker;
  /** What a session leaves on a lost node: recorded before it moves, rescued before it moves back. */
  leftVolumes: LeftVolumes;
  /** The tenant's volumes the session takes along. */
  volumes: MovingVolumes;
  /** Keeps the egress audit the drained node holds of a session in the store before its volume there is deleted. */
  audit: Pick<EgressService, 'keepAudit'>;
  metrics: Metrics;
  log: (message: string) => void;
}

/** Object-store failures that make one checkpoint unusable, not the move: the next older one is tried. */
const unusableObject = new Set<string>([ErrorCode.OBJECT_NOT_FOUND, ErrorCode.OBJECT_CORRUPT]);

/**
 * Sessions leaving their node, in their lifecycle turn. One whose node is lost goes on on another
 * node from its newest shipped checkpoint, fetched there (a full checkpoint's memory image comes
 * along); a checkpoint whose objects are missing or do not read back whole is skipped for the next
 * older one. One whose node is drained moves with its processes where a full checkpoint can be
 * taken, and with everything it wrote. Either way the session's history says from where to where,
 * and from which checkpoint, and the move is a placement of its own (its epoch advanced).
 */
export class SessionMover {
  constructor(private readonly deps: SessionMoverDeps) {}

  /**
   * Moves the session if the node holding its volume is lost; the moved row and what its history
   * should tell, or null when it stays. The one question of loss that decides a move: asked here,
   * in the session's lifecycle turn, of the volume's node, since a call that saw its sandbox's node
   * fail (session-calls.ts asks only to know whether to forget that sandbox) may wait behind other
   * operations, and the node may be back by then.
   */
  async moveIfLost(row: SessionRow): Promise<{ row: SessionRow; note: string } | null> {
    const from = row.volumeNodeId;
    if (!from || !(await this.deps.nodes.isLost(from))) return null;
    await this.deps.volumes.refuseIfPinned(row, `node ${from}, which holds it, is lost`);
    if (!this.deps.shipper.enabled)
      throw new SpaceError(
        ErrorCode.NODE_UNAVAILABLE,
        `node ${from}, which holds session ${row.id}, is lost; without an object store (SPACE_OBJECT_STORE) the session waits for it to come back`,
      );
    // Never from a rescue: it holds a volume left on a node earlier, another timeline than the
    // session's since, whose creation time says nothing of its content (a move from one told a
    // time its files were not from, and went back to older files than it said).
    const shipped = (await this.deps.store.listCheckpoints(row.id)).filter((c) => c.shippedAt && c.trigger !== 'rescue').reverse();
    if (shipped.length === 0)
      throw new SpaceError(
        ErrorCode.NODE_UNAVAILABLE,
        `node ${from}, which holds session ${row.id}, is lost, and none of its checkpoints reached the object store`,
      );
    // What it wrote there after the checkpoint it moves on from is rescued when the node is back
    // (recorded first: a crash after the move must not forget it; a move that fails leaves it in place).
    await this.deps.leftVolumes.record(row.id, from, this.deps.volumes.taken(row));
    return this.relocate(row, await this.deps.nodes.place(), shipped, `node ${from} was lost`, true);
  }

  /**
   * Moves the session off its node, which is being drained. A running sandbox is saved in a full
   * checkpoint first, then stopped: its processes go along. What it wrote between that checkpoint
   * and the stop is kept in an fs checkpoint, which is what moves instead when the session's
   * `onResume` is `files` (or no full checkpoint could be taken). Both reach the object store,
   * and the one moving becomes its volume on another node (a caller that holds the session's turn
   * starts its sandbox there: `hadSandbox`). Its volume on the drained node is deleted once it is
   * safe in the object store (and its egress audit there kept in the store). Runs in the session's lifecycle turn.
   */
  async moveOff(row: SessionRow): Promise<{ row: SessionRow; note: string; hadSandbox: boolean }> {
    await this.deps.volumes.refuseIfPinned(row, 'its node is being drained');
    if (!this.deps.shipper.enabled)
      throw new SpaceError(ErrorCode.OBJECT_STORE_UNAVAILABLE, 'draining a node moves its sessions through the object store: set SPACE_OBJECT_STORE');
    const from = await this.deps.nodes.forVolume(row);
    // Where it goes is found first: with no node to take it, the session is left as it was.
    const to = await this.deps.nodes.place();
    const full = row.sandboxId ? await this.saveProcesses(row) : null;
    if (row.sandboxId) {
      await (await this.deps.nodes.forSandbox(row)).stopSandbox(row.sandboxId);
      await this.deps.store.recordSandboxEnd(row.sandboxId, 'moved');
      await updatePlaced(this.deps.store, row, { status: 'stopped', sandboxId: null, nodeId: null, sandboxStartedAt: null });
    }
    // Written after the full checkpoint (or nothing saved yet): an fs checkpoint holds it, never pruned when it is not the one moving.
    const newerFiles = full === null || (await from.volumeChanged(row.id, full.id));
    const withProcesses = full !== null && (!newerFiles || row.onResume === 'processes');
    const files = newerFiles ? await this.shipOrFail(row, await this.deps.taker.take(row, 'fs', withProcesses ? 'resume' : 'auto')) : null;
    const moving = withProcesses ? await this.shipOrFail(row, full) : files!;
    const wentBack =
      withProcesses && files
        ? [`went back to ${full.id} of ${full.createdAt} to restore its processes; the files written after it are kept in ${files.id}`]
        : [];
    const moved = await this.relocate({ ...row, sandboxId: null }, to, [moving], `node ${from.nodeId} was drained`, false, wentBack);
    await this.deps.audit
      .keepAudit(row.id, from)
      .then(() => from.deleteVolume(row.id))
      .then(() => this.deps.volumes.dropCopiesOn(from, this.deps.volumes.taken(row)))
      .catch((err: Error) => this.deps.log(`volume of moved session ${row.id} left on node ${from.nodeId}: ${err.message}`));
    return { ...moved, hadSandbox: row.sandboxId !== null };
  }

  /** A full checkpoint of the running sandbox, or null when none could be taken (the move goes on with an fs one). */
  private async saveProcesses(row: SessionRow): Promise<CheckpointRow | null> {
    try {
      const taken = await this.deps.taker.take(row, 'full', 'auto');
      return taken.kind === 'full' ? taken : null;
    } catch (err) {
      this.deps.log(`session ${row.id}: no full checkpoint before its move, its processes do not go along: ${(err as Error).message}`);
      return null;
    }
  }

  /** Ships the checkpoint now and returns it as shipped; a move never deletes the only copy of what it did not ship. */
  private async shipOrFail(row: SessionRow, taken: CheckpointRow): Promise<CheckpointRow> {
    // Shipped by this control plane, or by the one whose background shipment of it is under way.
    await this.deps.shipper.ship(taken, { awaitOthers: true });
    const shipped = await this.deps.store.getCheckpoint(row.tenantId, taken.id);
    if (!shipped?.shippedAt)
      throw new SpaceError(ErrorCode.OBJECT_STORE_UNAVAILABLE, `checkpoint ${taken.id} of session ${row.id} did not reach the object store`);
    return shipped;
  }

  /** Fetches the newest of `candidates` that reads back whole onto another node and makes it the session's volume there. */
  private async relocate(
    row: SessionRow,
    to: NodeClient,
    candidates: CheckpointRow[],
    why: string,
    newerStayBehind: boolean,
    alsoTell: string[] = [],
  ): Promise<{ row: SessionRow; note: string }> {
    const from = row.volumeNodeId;
    const skipped: string[] = [];
    for (const checkpoint of candidates) {
      const missing = this.deps.volumes.missingCopies(row, checkpoint);
      if (missing) {
        skipped.push(`${checkpoint.id} (${missing})`);
        continue;
      }
      try {
        await this.deps.shipper.bringTo(to, checkpoint);
      } catch (err) {
        if (!isSpaceError(err) || !unusableObject.has(err.code)) throw err;
        skipped.push(`${checkpoint.id} (${err.message})`);
        continue;
      }
      // Moving back onto a node it left while that node was lost: what it left there is kept first.
      await this.deps.leftVolumes.rescueBeforeArrival(row, to);
      // A placement of its own: of two control planes moving it at once (one stalled past its lease), one goes on.
      const placed = await placeAnew(this.deps.store, row);
      await to.placedAt({ sessionId: row.id, epoch: placed.placementEpoch }).restoreVolume(row.id, checkpoint.id);
      await this.deps.volumes.placeOn(row, checkpoint, to);
      if (row.sandboxId) await this.deps.store.recordSandboxEnd(row.sandboxId, 'lost');
      const note = [
        `${why}: the session moved to node ${to.nodeId} from ${checkpoint.id} of ${checkpoint.createdAt}${newerStayBehind ? ` (what was written after it stayed on ${from})` : ''}`,
        ...alsoTell,
        ...(skipped.length ? [`skipped as unreadable: ${skipped.join('; ')}`] : []),
      ].join('; ');
      // Told by the session's next start, wherever it happens: this control plane may die before its own start records it
      // (a note a crashed start left stays in front).
      const resumeNote = [row.resumeNote, note].filter(Boolean).join('; ');
      const patch = { volumeNodeId: to.nodeId, status: 'stopped' as const, sandboxId: null, nodeId: null, sandboxStartedAt: null, resumeNote };
      await updatePlaced(this.deps.store, placed, patch);
      this.deps.metrics.inc('sessions_moved');
      this.deps.log(`session ${row.id}: ${note}`);
      return { row: { ...placed, ...patch }, note };
    }
    throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, `${why} and no shipped checkpoint of session ${row.id} could be used: ${skipped.join('; ')}`);
  }
}
