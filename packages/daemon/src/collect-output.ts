import type { ExecResult } from '@space/protocol';
import type { ManagedProcess } from './managed-process.js';

/** Gathers a process's output until it exits, keeping at most `maxBytes` of each stream. */
export function collectOutput(proc: ManagedProcess, maxBytes: number): Promise<ExecResult> {
  return new Promise((resolve) => {
    const out = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
    const size = { stdout: 0, stderr: 0 };
    let truncated = false;
    proc.subscribe((event) => {
      if (event.type === 'exit') {
        resolve({
          exitCode: event.exitCode,
          signal: event.signal,
          timedOut: event.timedOut,
          truncated,
          stdout: Buffer.concat(out.stdout).toString('utf8'),
          stderr: Buffer.concat(out.stderr).toString('utf8'),
        });
        return;
      }
      const room = maxBytes - size[event.type];
      if (room <= 0) {
        truncated = true;
        return;
      }
      const kept = event.data.length > room ? event.data.subarray(0, room) : event.data;
      if (kept.length < event.data.length) truncated = true;
      out[event.type].push(kept);
      size[event.type] += kept.length;
    });
  });
}
