import { type DrainResult, type NodeView, isSpaceError } from '@space/protocol';
import { eachAtMost } from '@space/server-kit';
import type { LifecycleQueue } from './lifecycle-queue.js';
import { type NodeDirectory, placementViewMs } from '../cluster/node-directory.js';
import type { SessionMover } from './session-mover.js';
import type { SessionService } from './session-service.js';
import type { Store } from '../store/store.js';

/** What became of one session of a drain. */
type DrainOutcome = { moved: DrainResult['moved'][number] } | { failed: DrainResult['failed'][number] } | null;

/**
 * Empties a node before maintenance or an upgrade: it takes no new sessions (`draining`), and each
 * of its sessions moves to another node through the object store, `parallel` at a time, each in its
 * own lifecycle turn; one that was running runs again there at once, its processes restored where a
 * full checkpoint could be taken. A session that cannot move now stays and is reported; draining
 * again retries it.
 */
export class NodeDrain {
  constructor(
    private readonly deps: {
      store: Store;
      nodes: NodeDirectory;
      lifecycle: LifecycleQueue;
      mover: SessionMover;
      sessions: Pick<SessionService, 'startSandbox'>;
      log: (message: string) => void;
      /** Sessions moved at once (`SPACE_DRAIN_PARALLEL`). */
      parallel: number;
    },
  ) {}

  async drain(nodeId: string, progress: (message: string) => void = () => undefined): Promise<DrainResult> {
    await this.deps.nodes.setStatus(nodeId, 'draining');
    // Placements decided before every control plane saw it draining land before the sessions are listed.
    await new Promise((resolve) => setTimeout(resolve, placementViewMs));
    const sessions = (await this.deps.store.listSessionsOnNode(nodeId)).filter((s) => s.volumeNodeId === nodeId);
    const outcomes: DrainOutcome[] = new Array(sessions.length).fill(null);
    let done = 0;
    await eachAtMost(sessions, this.deps.parallel, async ({ id, tenantId }, i) => {
      const outcome = await this.moveOne(nodeId, id, tenantId);
      outcomes[i] = outcome;
      const said = !outcome ? 'gone or moved already' : 'moved' in outcome ? `moved to ${outcome.moved.to}` : `not moved: ${outcome.failed.message}`;
      progress(`${++done}/${sessions.length} ${id}: ${said}`);
    });
    return {
      nodeId,
      moved: outcomes.flatMap((o) => (o && 'moved' in o ? [o.moved] : [])),
      failed: outcomes.flatMap((o) => (o && 'failed' in o ? [o.failed] : [])),
    };
  }

  /** Moves one session off the node in its lifecycle turn; null when it is gone or left the node already. */
  private async moveOne(nodeId: string, id: string, tenantId: string): Promise<DrainOutcome> {
    try {
      const moved = await this.deps.lifecycle.run(id, 'move', async () => {
        const row = await this.deps.store.getSession(tenantId, id);
        if (!row || row.volumeNodeId !== nodeId) return null;
        const moved = await this.deps.mover.moveOff(row);
        // Moved it is; a start that fails now is the next call's resume.
        if (moved.hadSandbox)
          await this.deps.sessions
            .startSandbox(moved.row, { volumeReady: true })
            .catch((err: Error) => this.deps.log(`session ${id} moved off node ${nodeId} but did not start on ${moved.row.volumeNodeId}: ${err.message}`));
        return moved;
      });
      return moved ? { moved: { sessionId: id, to: moved.row.volumeNodeId!, note: moved.note } } : null;
    } catch (err) {
      return { failed: { sessionId: id, code: isSpaceError(err) ? err.code : 'INTERNAL', message: (err as Error).message } };
    }
  }

  /** Takes new sessions again. */
  undrain(nodeId: string): Promise<NodeView> {
    return this.deps.nodes.setStatus(nodeId, 'ready');
  }
}
