import { readFileSync } from 'node:fs';
import path from 'node:path';
import { cgroupRoot, cgroupVersion, sandboxCgroupDir } from './cgroup-usage.js';

/**
 * Kills (SIGKILL) every process in the sandbox's cgroup, its Sentry and gofer among them; returns
 * how many were signalled. For a sandbox whose runtime answers no command any more, not even
 * `runsc delete --force`: once its Sentry is gone, that command completes.
 */
export function killCgroupProcesses(sandboxId: string, root = cgroupRoot): number {
  const dirs =
    cgroupVersion(root) === 2
      ? [sandboxCgroupDir(sandboxId, undefined, root)]
      : [sandboxCgroupDir(sandboxId, 'pids', root), sandboxCgroupDir(sandboxId, 'memory', root)];
  const pids = new Set<number>();
  for (const dir of dirs) {
    let listed = '';
    try {
      listed = readFileSync(path.join(dir, 'cgroup.procs'), 'utf8');
    } catch {
      continue; // not in this hierarchy, or already removed
    }
    for (const line of listed.split('\n')) if (/^\d+$/.test(line)) pids.add(Number(line));
  }
  let signalled = 0;
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
      signalled++;
    } catch {
      // exited meanwhile
    }
  }
  return signalled;
}
