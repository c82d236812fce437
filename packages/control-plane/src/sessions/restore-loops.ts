import type { SandboxHistoryRow } from '../store/store.js';
import { isSandboxDeath } from './sandbox-deaths.js';

/**
 * Why a resume must not restore the processes of full checkpoint `checkpointId` again, or null to
 * restore them: the sandboxes last restored from it died, so what runs in its memory takes every
 * sandbox made of it down (a process that stops the agent, one that kills every process) and each
 * resume would only bring it back. Once is enough when the sandbox stopped answering (each such
 * death holds a caller for its call's whole bound), twice otherwise (a death can be the host's).
 * Only the restores of that checkpoint count, so a sandbox booted on the files in between does not
 * make the next resume try it again. `history` oldest first, as the store lists it.
 */
export function restoreLoopOf(history: readonly SandboxHistoryRow[], checkpointId: string): string | null {
  const restores = history.filter((start) => start.restoredFrom === checkpointId);
  const [last, before] = [restores.at(-1), restores.at(-2)];
  if (!isSandboxDeath(last?.endReason)) return null;
  if (last.endReason === 'unresponsive') return `the sandbox restored from it (${last.id}) stopped answering and was stopped`;
  if (!isSandboxDeath(before?.endReason)) return null;
  return `the last two sandboxes restored from it died (${before.id}: ${before.endReason}, ${last.id}: ${last.endReason})`;
}
