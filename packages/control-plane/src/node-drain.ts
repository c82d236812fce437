import { type DrainResult, type NodeView, isSpaceError } from '@space/protocol';
import type { LifecycleQueue } from './lifecycle-queue.js';
import type { NodeDirectory } from './node-directory.js';
import type { SessionMover } from './session-mover.js';
import type { Store } from './store/store.js';

/**
 * Empties a node before maintenance or an upgrade: it takes no new sessions (`draining`), and each
 * of its sessions moves to another node through the object store, one at a time, each in its own
 * lifecycle turn. A session that cannot move now stays and is reported; draining again retries it.
 */
export class NodeDrain {
  constructor(private readonly deps: { store: Store; nodes: NodeDirectory; lifecycle: LifecycleQueue; mover: SessionMover }) {}

  async drain(nodeId: string, progress: (message: string) => void = () => undefined): Promise<DrainResult> {
    await this.deps.nodes.setStatus(nodeId, 'draining');
    const result: DrainResult = { nodeId, moved: [], failed: [] };
    const sessions = (await this.deps.store.listAllSessions()).filter((s) => s.volumeNodeId === nodeId);
    for (const [i, { id, tenantId }] of sessions.entries()) {
      try {
        const moved = await this.deps.lifecycle.run(id, 'move', async () => {
          const row = await this.deps.store.getSession(tenantId, id);
          return row && row.volumeNodeId === nodeId ? this.deps.mover.moveOff(row) : null;
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
