import { ErrorCode, SpaceError, isSpaceError } from '@space/protocol';
import type { CheckpointShipper } from './checkpoint-shipper.js';
import type { Metrics } from './metrics.js';
import type { NodeDirectory } from './node-directory.js';
import type { SessionRow, Store } from './store/store.js';

export interface SessionMoverDeps {
  store: Store;
  nodes: NodeDirectory;
  shipper: CheckpointShipper;
  metrics: Metrics;
  log: (message: string) => void;
}

/** Object-store failures that make one checkpoint unusable, not the move: the next older one is tried. */
const unusableObject = new Set<string>([ErrorCode.OBJECT_NOT_FOUND, ErrorCode.OBJECT_CORRUPT]);

/**
 * A session whose node is lost goes on on another node: its newest shipped checkpoint is fetched
 * there and becomes its volume (a full checkpoint's memory image comes along). A checkpoint whose
 * objects are missing or do not read back whole is skipped for the next older one, and the
 * session's history says so. Runs in the session's lifecycle turn (a resume).
 */
export class SessionMover {
  constructor(private readonly deps: SessionMoverDeps) {}

  /** Moves the session if the node holding its volume is lost; the moved row and what its history should tell, or null when it stays. */
  async moveIfLost(row: SessionRow): Promise<{ row: SessionRow; note: string } | null> {
    const from = row.volumeNodeId;
    if (!from || !(await this.deps.nodes.isLost(from))) return null;
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
    const to = await this.deps.nodes.place();
    const skipped: string[] = [];
    for (const checkpoint of shipped) {
      const form = await this.deps.shipper.shippedForm(checkpoint);
      if (!form) continue;
      try {
        await to.fetchCheckpoint(checkpoint.id, form.base, form.objects);
      } catch (err) {
        if (!isSpaceError(err) || !unusableObject.has(err.code)) throw err;
        skipped.push(`${checkpoint.id} (${err.message})`);
        continue;
      }
      await to.restoreVolume(row.id, checkpoint.id);
      if (row.sandboxId) await this.deps.store.recordSandboxEnd(row.sandboxId, 'lost');
      await this.deps.store.updateSession(row.id, { volumeNodeId: to.nodeId, status: 'stopped', sandboxId: null, nodeId: null, sandboxStartedAt: null });
      this.deps.metrics.inc('sessions_moved');
      const note = [
        `node ${from} was lost: the session moved to node ${to.nodeId} and went back to ${checkpoint.id} of ${checkpoint.createdAt} (what was written after it stayed on ${from})`,
        ...(skipped.length ? [`skipped as unreadable: ${skipped.join('; ')}`] : []),
      ].join('; ');
      this.deps.log(`session ${row.id}: ${note}`);
      return { row: { ...row, volumeNodeId: to.nodeId, status: 'stopped', sandboxId: null, nodeId: null, sandboxStartedAt: null }, note };
    }
    throw new SpaceError(
      ErrorCode.NODE_UNAVAILABLE,
      `node ${from} is lost and no shipped checkpoint of session ${row.id} could be read: ${skipped.join('; ')}`,
    );
  }
}
