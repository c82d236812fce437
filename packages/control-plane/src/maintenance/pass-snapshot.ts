import type { SandboxInfo } from '@space/protocol';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { SandboxClaim, SessionRow, Store } from '../store/store.js';
import type { ListedSandboxes, PlacedOn } from './cluster-sweeps.js';
import type { OnNode } from './session-upkeep.js';
import { lookAfterWriteMs } from './session-policy.js';

/** What a pass works on. */
export interface Snapshot {
  listed: ListedSandboxes;
  /** The sandboxes each node that answered runs. */
  running: Map<string, OnNode>;
  /** Why each live node that did not answer did not (its sessions wait for a pass it answers). */
  unlisted: Map<string, string>;
  sessions: SessionRow[];
  placedOn: PlacedOn;
}

/**
 * Whether the claimed sandbox, listed by its node, is no longer quiet while its next visit is
 * further away than a visit worked out while it was not quiet ever is: a look found it quiet and
 * put the visit off, and something has come in since.
 */
function writtenSinceQuiet(claim: SandboxClaim, listed: SandboxInfo | undefined, now: number): boolean {
  const within = lookAfterWriteMs(claim);
  return listed !== undefined && !listed.quietSince && within !== null && claim.maintainAfter !== null && claim.maintainAfter > now + within;
}

/**
 * What a pass works on, read in this order (a session is recorded before its sandbox starts, so
 * each listed sandbox's session is found if it exists):
 * - the sandboxes each live node (of those `ofNode` takes) runs; a node that does not answer is left out (`unlisted`);
 * - the sessions something is due for (`listSessionsToMaintain`: a start under way, a timeout
 *   passed, a sandbox whose next visit came), however many others there are;
 * - which sandbox every session on those nodes records (`listSandboxClaims`, a narrow read),
 *   compared with the lists: a recorded sandbox its node did not list (gone?), a listed one its
 *   session does not record (moved? deleted?) and one no longer quiet whose next visit a quiet
 *   look put off (written again: `lookAfterWriteMs`) bring their sessions into the pass too.
 * `placedOn` holds, for every listed sandbox's session, where its volume is (for fencing).
 */
export async function readSnapshot(deps: { nodes: NodeDirectory; store: Store; now: () => number }, ofNode?: (nodeId: string) => boolean): Promise<Snapshot> {
  const listed: ListedSandboxes = new Map();
  const unlisted = new Map<string, string>();
  const nodes = (await deps.nodes.live()).filter((node) => !ofNode || ofNode(node.nodeId));
  await Promise.all(
    nodes.map(async (node) => {
      const sandboxes = await node.listSandboxes().catch((err: Error) => void unlisted.set(node.nodeId, err.message));
      if (sandboxes) listed.set(node.nodeId, { node, sandboxes });
    }),
  );
  const running = new Map([...listed].map(([nodeId, { sandboxes }]) => [nodeId, new Map(sandboxes.map((s) => [s.sandboxId, s]))]));
  const nodeIds = ofNode ? nodes.map((n) => n.nodeId) : undefined;
  const now = deps.now();
  const due = await deps.store.listSessionsToMaintain(now, nodeIds);
  const claims = new Map((await deps.store.listSandboxClaims(nodeIds)).map((c) => [c.sessionId, c]));
  const gone = [...claims.values()].filter((c) => running.get(c.nodeId)?.has(c.sandboxId) === false).map((c) => c.sessionId);
  const unclaimed = [...listed].flatMap(([nodeId, { sandboxes }]) =>
    sandboxes.filter((s) => claims.get(s.sessionId)?.sandboxId !== s.sandboxId || claims.get(s.sessionId)?.nodeId !== nodeId).map((s) => s.sessionId),
  );
  const written = [...claims.values()].filter((c) => writtenSinceQuiet(c, running.get(c.nodeId)?.get(c.sandboxId), now)).map((c) => c.sessionId);
  const known = new Set(due.map((s) => s.id));
  const others = [...new Set([...gone, ...unclaimed, ...written])].filter((id) => !known.has(id));
  const sessions = [...due, ...(others.length ? await deps.store.findSessions(others) : [])];
  const placedOn: PlacedOn = new Map([...claims.values()].map((c) => [c.sessionId, { volumeNodeId: c.volumeNodeId }]));
  for (const row of sessions) placedOn.set(row.id, row);
  return { listed, running, unlisted, sessions, placedOn };
}
