/**
 * Placement epochs: a fencing token for where a session runs. The store counts every placement of a
 * session (each sandbox start, each move to another node) in `sessions.placement_epoch`, advanced
 * only by a control plane that read the one before it (compare and set), and every call a control
 * plane makes to a node about a session names the placement it read, in this header:
 * `<sessionId> <epoch>`. A node refuses a call naming an older placement of a session than the
 * newest it has seen (`PLACEMENT_STALE`): a control plane that read a session, stalled (or lost its
 * lease) and woke up after another placed it anew cannot act on it.
 */
export const PLACEMENT_HEADER = 'x-space-placement';

export interface Placement {
  sessionId: string;
  epoch: number;
}

export function placementHeaderValue(placement: Placement): string {
  return `${placement.sessionId} ${placement.epoch}`;
}

/** The placement a header names; null for none or one not of that shape. */
export function parsePlacementHeader(value: string | string[] | undefined): Placement | null {
  const match = typeof value === 'string' ? /^(ses_[a-z0-9]{1,40}) (\d{1,15})$/.exec(value) : null;
  return match ? { sessionId: match[1]!, epoch: Number(match[2]) } : null;
}
