import { ErrorCode, SpaceError, isSpaceError } from '@space/protocol';
import type { SandboxHistoryRow, SessionPatch, SessionRow, Store } from '../store/store.js';
import type { HeldLease } from './lifecycle-queue.js';

/*
 * A session's placements (protocol's placement.ts): each sandbox start and each move to another
 * node is a placement of its own, counted in the store by compare and set, so of two control planes
 * acting on one session (one stalled past its lease) only the one that read the newest placement
 * goes on; the other's calls to nodes name a placement they refuse once they have seen a newer one.
 */

function placedSince(row: SessionRow): SpaceError {
  return new SpaceError(
    ErrorCode.PLACEMENT_STALE,
    `session ${row.id} was placed anew by another control plane since this one read it (placement ${row.placementEpoch}); send the call again`,
    { sessionId: row.id },
  );
}

/** The session placed anew: its epoch advanced from the one `row` has; PLACEMENT_STALE when another placement came first. */
export async function placeAnew(store: Store, row: SessionRow): Promise<SessionRow> {
  if (!(await store.advancePlacement(row.id, row.placementEpoch))) throw placedSince(row);
  return { ...row, placementEpoch: row.placementEpoch + 1 };
}

/** Updates the session's row while it is still at `row`'s placement; PLACEMENT_STALE when it was placed anew since. */
export async function updatePlaced(store: Store, row: SessionRow, patch: SessionPatch): Promise<void> {
  if (!(await store.updatePlacedSession(row.id, row.placementEpoch, patch))) throw placedSince(row);
}

/** Whether a call failed for naming an older placement than the store's or a node's newest. */
export function isPlacementStale(err: unknown): boolean {
  return isSpaceError(err) && err.code === ErrorCode.PLACEMENT_STALE;
}

/**
 * `updatePlaced` with the sandbox's start recorded in the session's history, in one transaction;
 * with `lease`, the operation's lease released in it too.
 */
export async function recordPlacedStart(store: Store, row: SessionRow, patch: SessionPatch, start: SandboxHistoryRow, lease?: HeldLease): Promise<void> {
  if (!(await store.recordPlacedStart(row.placementEpoch, patch, start, lease?.holder))) throw placedSince(row);
  if (lease) lease.released = true;
}
