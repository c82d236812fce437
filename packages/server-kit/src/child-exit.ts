import type { ChildProcess } from 'node:child_process';

/** How a child process ended: its exit code, or the signal that ended it. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** It was still running when its grace ran out, and was SIGKILLed. */
  killed: boolean;
}

/** Whether the child has exited (its 'exit' event came). */
export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/**
 * Sends `signal` to the child and resolves once it has exited (at once when it already had). With
 * `graceMs`, a child still running after it is SIGKILLed and awaited: the stop is bounded.
 * `beforeKill` runs just before that SIGKILL, while the child still runs (to see what it hung on).
 */
export function signalAndWait(child: ChildProcess, signal: NodeJS.Signals, graceMs?: number, beforeKill?: () => void): Promise<ChildExit> {
  if (hasExited(child)) return Promise.resolve({ code: child.exitCode, signal: child.signalCode, killed: false });
  return new Promise((resolve) => {
    let killed = false;
    const timer =
      graceMs === undefined
        ? undefined
        : setTimeout(() => {
            killed = true;
            beforeKill?.();
            child.kill('SIGKILL');
          }, graceMs);
    child.once('exit', (code, exitSignal) => {
      clearTimeout(timer);
      resolve({ code, signal: exitSignal, killed });
    });
    child.kill(signal);
  });
}
