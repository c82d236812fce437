import { ErrorCode, SpaceError } from '@space/protocol';
import { processAlive } from '@space/server-kit';
import type { LiveSandbox } from './live-sandboxes.js';

/** How often a sandbox with a call or stream in flight is checked for death. */
const deathCheckMs = 1000;
/** How long a full checkpoint waits for the calls in flight to end before it is refused. */
const callDrainMs = 5000;

/**
 * Calls `onDeath` once if the sandbox process dies before the returned function is called. A
 * sandbox killed from outside (out of memory, a crash) takes its network stack with it, so a call
 * or stream to its daemon in flight would wait for an answer nobody sends (no reset comes); the
 * caller cuts it instead. Checked every second, one read of /proc per check.
 */
export function onSandboxDeath(live: LiveSandbox, onDeath: () => void): () => void {
  if (live.pid === null) return () => undefined;
  const pid = live.pid;
  const timer = setInterval(() => {
    if (processAlive(pid)) return;
    clearInterval(timer);
    onDeath();
  }, deathCheckMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Runs `work`, a call to the sandbox's daemon: counted in flight (a full checkpoint waits for it
 * rather than cut it, see callsEnded), and cut if the sandbox process dies meanwhile.
 */
export async function callDaemon<T>(live: LiveSandbox, work: () => Promise<T>): Promise<T> {
  live.callsInFlight++;
  const stopWatching = onSandboxDeath(live, () => live.daemon.close());
  try {
    return await work();
  } finally {
    stopWatching();
    live.callsInFlight--;
  }
}

/** Waits for the calls in flight to the sandbox to end; refuses the full checkpoint when they take longer than `callDrainMs`. */
export async function callsEnded(live: LiveSandbox): Promise<void> {
  const deadline = Date.now() + callDrainMs;
  do {
    // A timer, not a microtask: a call that passed getAlive just now has counted itself by then.
    await new Promise((r) => setTimeout(r, 10));
    if (live.callsInFlight === 0) return;
  } while (Date.now() < deadline);
  throw new SpaceError(
    ErrorCode.FULL_CHECKPOINT_REFUSED,
    `${live.callsInFlight} call(s) to the sandbox did not end within ${callDrainMs / 1000} s; a full checkpoint would cut them`,
  );
}
