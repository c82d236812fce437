import { readFileSync } from 'node:fs';

/**
 * True while the process exists and is not a zombie: a killed process lingers as one until its
 * parent reaps it (a sandbox until runsc does; an orphan until init does, seconds in a container).
 * Synchronous: /proc is not the volume, and a caller decides on the answer at once.
 */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}
