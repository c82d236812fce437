import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';

/** Where the node stages its full checkpoints' memory images in host memory (as `ImageStaging` names it). */
export function imageStagingDir(dataDir: string): string {
  return `/dev/shm/space-images-${createHash('sha256').update(dataDir).digest('hex').slice(0, 12)}`;
}

/** What a SPACE data directory has on the host: used to prove nothing is left behind. */
export function hostResources(dataDir: string): { runsc: string[]; netns: string[]; mounts: string[]; loops: string[]; staged: string[] } {
  const runsc = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.startsWith('runsc') && line.includes(`--root=${dataDir}/`));
  const netns = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => n.startsWith('space-sbx_'));
  const mounts = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .filter((l) => l.split(' ')[1]?.startsWith(dataDir));
  const loops = execFileSync('losetup', ['-j', `${dataDir}/btrfs.img`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
  const staged = [imageStagingDir(dataDir)].filter((dir) => existsSync(dir));
  return { runsc, netns, mounts, loops, staged };
}

/**
 * The processes under `rootPid` and those naming `dataDir` (the sandboxes' runsc, under their own
 * reaper), a line each: pid, state, seconds running, where in the kernel it waits, command line.
 * What a hung stop was waiting on, read before it is SIGKILLed.
 */
export function processesOf(rootPid: number, dataDir: string): string {
  const rows = execFileSync('ps', ['-eo', 'pid=,ppid=,stat=,etimes=,wchan:32=,args='], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [pid, ppid, ...rest] = line.trim().split(/\s+/);
      return { pid: Number(pid), ppid: Number(ppid), line: `${pid} ${rest.join(' ')}`.slice(0, 300) };
    });
  const wanted = new Set([rootPid]);
  // ps lists parents before their children (pids grow), except after pid wrap-around: a few passes.
  for (let pass = 0; pass < 3; pass++) for (const row of rows) if (wanted.has(row.ppid)) wanted.add(row.pid);
  return rows
    .filter((row) => wanted.has(row.pid) || row.line.includes(dataDir))
    .map((row) => row.line)
    .join('\n');
}

/** Host pid of a sandbox's runsc-sandbox process, found as an operator would. */
export function sandboxHostPid(dataDir: string, sandboxId: string): number {
  // runsc's complaint about a sandbox that is gone reaches the caller as the thrown error, not stderr.
  const state = JSON.parse(
    execFileSync('runsc', [`--root=${dataDir}/node/runsc`, 'state', sandboxId], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }),
  ) as {
    pid: number;
  };
  // A sandbox being created or stopped has no process: runsc says -1 or 0, and a kill of those would
  // reach every process on the host (-1) or the caller's own group (0).
  if (!Number.isInteger(state.pid) || state.pid <= 1) throw new Error(`sandbox ${sandboxId} has no host process now (runsc state: pid ${state.pid})`);
  return state.pid;
}

/** Resident memory of a host process, MB. */
export function processRssMb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
}
