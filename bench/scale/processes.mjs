// The processes of the scale harness: real control planes (`space control-plane`, as a cluster runs
// them) started on a shared database, and what each uses, read from /proc.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const cliMain = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../packages/cli/dist/main.js');
const ticksPerSec = 100;

/**
 * Starts a control plane as a cluster member (no node of its own: nodes register) and resolves
 * with its process and URL once it serves. `env`: its settings.
 */
export function startControlPlane(name, env, output = () => undefined) {
  const child = spawn(process.execPath, [cliMain, 'control-plane'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    const lines = [];
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 60 s: ${lines.slice(-5).join(' | ')}`)), 60_000);
    const onLine = (line) => {
      lines.push(line);
      output(name, line);
      const match = /control plane on (http:\/\/\S+),/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve({ name, child, url: match[1].replace('0.0.0.0', '127.0.0.1') });
      }
    };
    for (const stream of [child.stdout, child.stderr]) {
      let rest = '';
      stream.on('data', (chunk) => {
        const parts = (rest + chunk).split('\n');
        rest = parts.pop();
        for (const line of parts) onLine(line);
      });
    }
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it served: ${lines.slice(-5).join(' | ')}`));
    });
  });
}

/** The fields of `/proc/<pid>/stat` after the command's name (which may hold spaces): [0] state, [1] parent, [11] utime, [12] stime, [13] cutime, [14] cstime. */
function statFields(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** A process's parent's pid. */
export function parentPid(pid) {
  return Number(statFields(pid)[1]);
}

/**
 * A process's CPU time (user + system, seconds) and resident memory (bytes), now; `childrenCpuSec`:
 * that of its children that ended and were waited for (the commands it ran).
 */
export function processUse(pid) {
  const fields = statFields(pid);
  const cpuSec = (Number(fields[11]) + Number(fields[12])) / ticksPerSec;
  const childrenCpuSec = (Number(fields[13]) + Number(fields[14])) / ticksPerSec;
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
  return { cpuSec, childrenCpuSec, rss };
}

/** CPU use between two `processUse` readings, as a share of one core. */
export function cpuShare(before, after, seconds) {
  return (after.cpuSec - before.cpuSec) / seconds;
}

/** `processUse` of a process and all its children (PostgreSQL: the postmaster and its backends), CPU summed. */
export function treeUse(rootPid) {
  const pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  const parentOf = (pid) => {
    try {
      return parentPid(pid);
    } catch {
      return null;
    }
  };
  // The root's own time and that of its children which ended (cutime, cstime), then the live children's.
  const rootFields = statFields(rootPid);
  let cpuSec = (Number(rootFields[13]) + Number(rootFields[14])) / ticksPerSec;
  let rss = 0;
  for (const pid of pids.map(Number).filter((p) => p === rootPid || parentOf(p) === rootPid)) {
    try {
      const use = processUse(pid);
      cpuSec += use.cpuSec;
      rss += use.rss;
    } catch {
      // It ended meanwhile.
    }
  }
  return { cpuSec, rss };
}
