import { type DrainResult, type NodeView, isSpaceError } from '@space/protocol';
import type { LifecycleQueue } from './lifecycle-queue.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { SessionMover } from './session-mover.js';
import type { SessionService } from './session-service.js';
import type { Store } from '../store/store.js';

/**
 * Empties a node before maintenance or an upgrade: it takes no new sessions (`draining`), and each
 * of its sessions moves to another node through the object store, one at a time, each in its own
 * lifecycle turn; one that was running runs again there at once, its processes restored where a
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
    },
  ) {}

  async drain(nodeId: string, progress: (message: string) => void = () => undefined): Promise<DrainResult> {
    await this.deps.nodes.setStatus(nodeId, 'draining');
    const result: DrainResult = { nodeId, moved: [], failed: [] };
    const sessions = (await this.deps.store.listAllSessions()).filter((s) => s.volumeNodeId === nodeId);
    for (const [i, { id, tenantId }] of sessions.entries()) {
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
        if (moved) result.moved.push({ sessionId: id, to: moved.row.volumeNodeId!, note: moved.note });
        progress(`${i + 1}/${sessions.length} ${id}: ${moved ? `moved to ${moved.row.volumeNodeId}` : 'gone or moved already'}`);
      } catch (err) {
        const code = isSpaceError(err) ? err.code : 'INTERNAL';
        result.failed.push({ sessionId: id, code, message: (err as Error).message });
        progress(`${i + 1}/${sessions.length} ${id}: not moved: ${(err as Error).message}`);
      }
    }
    return result;
  }

  /** Takes new sessions again. */
  undrain(nodeId: string): Promise<NodeView> {
    return this.deps.nodes.setStatus(nodeId, 'ready');
  }
}
