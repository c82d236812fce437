import { closeSync, existsSync, openSync, readFileSync, readSync } from 'node:fs';
import path from 'node:path';
import type { SandboxUsage } from './driver.js';

/**
 * A cgroup file read at once: cgroupfs answers from memory in microseconds, never from the volume.
 * Read asynchronously, each file waited for a turn in libuv's threadpool behind the node's own file
 * operations (six in a row held a pooled create's claim ~1 ms, measured). Null when it does not
 * exist (no such cgroup, or another cgroup version).
 */
function readNow(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

/** Where the host's cgroup hierarchies are mounted. */
export const cgroupRoot = '/sys/fs/cgroup';

/**
 * The directory of the cgroup `space/<sandboxId>` gVisor puts a sandbox in (its `cgroupsPath`): in
 * cgroup v2 one for every controller; in v1 the one in `v1Controller`'s hierarchy.
 */
export function sandboxCgroupDir(sandboxId: string, v1Controller?: 'cpu' | 'cpuacct' | 'memory' | 'pids', root = cgroupRoot): string {
  return v1Controller ? path.join(root, v1Controller, 'space', sandboxId) : path.join(root, 'space', sandboxId);
}

/** A byte or count value; cgroup v1 writes a huge number and v2 "max" for "no limit". */
function limitOf(text: string | null): number | null {
  if (text === null || text === 'max') return null;
  const value = Number(text);
  return Number.isFinite(value) && value < 2 ** 62 ? value : null;
}

/**
 * The counters of the cgroup `space/<sandboxId>` that gVisor puts a sandbox in (its `cgroupsPath`),
 * from cgroup v2 (unified) or v1 (per controller). Null when neither has it.
 */
export function readCgroupUsage(sandboxId: string, root = cgroupRoot): SandboxUsage | null {
  const v2 = sandboxCgroupDir(sandboxId, undefined, root);
  const cpuStat = readNow(path.join(v2, 'cpu.stat'));
  if (cpuStat !== null) {
    const usec = Number(/^usage_usec (\d+)$/m.exec(cpuStat)?.[1] ?? 0);
    const [quota, period] = (readNow(path.join(v2, 'cpu.max')) ?? 'max').split(' ');
    return {
      cpuNanos: usec * 1000,
      cpuCount: quota === 'max' || !period ? null : Number(quota) / Number(period),
      memoryBytes: Number(readNow(path.join(v2, 'memory.current')) ?? 0),
      memoryLimitBytes: limitOf(readNow(path.join(v2, 'memory.max'))),
    };
  }
  const cpuacct = readNow(path.join(sandboxCgroupDir(sandboxId, 'cpuacct', root), 'cpuacct.usage'));
  if (cpuacct === null) return null;
  const cpu = sandboxCgroupDir(sandboxId, 'cpu', root);
  const quota = Number(readNow(path.join(cpu, 'cpu.cfs_quota_us')));
  const period = Number(readNow(path.join(cpu, 'cpu.cfs_period_us')));
  const memory = sandboxCgroupDir(sandboxId, 'memory', root);
  return {
    cpuNanos: Number(cpuacct),
    cpuCount: quota > 0 && period > 0 ? quota / period : null,
    memoryBytes: Number(readNow(path.join(memory, 'memory.usage_in_bytes')) ?? 0),
    memoryLimitBytes: limitOf(readNow(path.join(memory, 'memory.limit_in_bytes'))),
  };
}

/**
 * Whether the sandbox's cgroup counted an OOM kill or a refused fork: v2 `memory.events` `oom_kill`
 * and `pids.events` `max`; v1 `memory.oom_control` `oom_kill` and `pids.events` `max`.
 */
export function readLimitHit(sandboxId: string, root = cgroupRoot): 'oom' | 'pids' | null {
  const count = (text: string | null, key: string): number => Number(new RegExp(`^${key} (\\d+)$`, 'm').exec(text ?? '')?.[1] ?? 0);
  const v2 = sandboxCgroupDir(sandboxId, undefined, root);
  const memory = readNow(path.join(v2, 'memory.events')) ?? readNow(path.join(sandboxCgroupDir(sandboxId, 'memory', root), 'memory.oom_control'));
  if (count(memory, 'oom_kill') > 0) return 'oom';
  const pids = readNow(path.join(v2, 'pids.events')) ?? readNow(path.join(sandboxCgroupDir(sandboxId, 'pids', root), 'pids.events'));
  return count(pids, 'max') > 0 ? 'pids' : null;
}

export type CgroupVersion = 1 | 2;

/** The host's cgroup hierarchy: v2 (unified) when its root lists its controllers, else v1. */
export function cgroupVersion(root = cgroupRoot): CgroupVersion {
  return existsSync(path.join(root, 'cgroup.controllers')) ? 2 : 1;
}

/**
 * Reads sandboxes' memory from their cgroups for the node's memory watch, which reads every sandbox
 * several times a second. Synchronous: as asynchronous reads they queued in libuv's threadpool ahead
 * of the node's own file operations, and a pooled create waited 30–50 ms behind them about one time
 * in three (bench/create-spans.mjs). Each sandbox's usage file stays open and is read again in place
 * (cgroupfs renders it anew at offset 0): half what opening it costs each time (21.6 µs against 44.6
 * beside 706 sandbox cgroups). `retain` closes the files of sandboxes no longer watched; a file
 * whose cgroup was removed fails its read and is opened anew.
 */
export class CgroupMemoryReader {
  private readonly files = new Map<string, number>();
  private readonly buffer = Buffer.alloc(32);

  constructor(
    private readonly version: CgroupVersion,
    private readonly root = cgroupRoot,
  ) {}

  /**
   * The memory the sandbox's cgroup holds that cannot simply be dropped: its usage less inactive
   * file pages (what cAdvisor calls the working set). Null when it has no cgroup. Below `atLeast`
   * its usage is returned as it is (the working set is no more), and `memory.stat` is not read.
   */
  workingSet(sandboxId: string, atLeast: number): number | null {
    const usage = this.usage(sandboxId);
    if (usage === null || usage < atLeast) return usage;
    const stat = readNow(path.join(this.dir(sandboxId), 'memory.stat')) ?? '';
    const inactive = Number(/^(?:total_)?inactive_file (\d+)$/m.exec(stat)?.[1] ?? 0);
    return Math.max(0, usage - inactive);
  }

  /** Closes the files of sandboxes not in `watched`. */
  retain(watched: ReadonlySet<string>): void {
    for (const sandboxId of this.files.keys()) if (!watched.has(sandboxId)) this.close(sandboxId);
  }

  closeAll(): void {
    for (const sandboxId of this.files.keys()) this.close(sandboxId);
  }

  private usage(sandboxId: string): number | null {
    const open = this.files.get(sandboxId);
    if (open !== undefined) {
      const value = this.readAt0(open);
      if (value !== null) return value;
      // Its cgroup was removed (ENODEV), perhaps made again under the same name: opened anew.
      this.close(sandboxId);
    }
    let fd: number;
    try {
      fd = openSync(path.join(this.dir(sandboxId), this.version === 2 ? 'memory.current' : 'memory.usage_in_bytes'), 'r');
    } catch {
      return null;
    }
    this.files.set(sandboxId, fd);
    const value = this.readAt0(fd);
    if (value === null) this.close(sandboxId);
    return value;
  }

  private readAt0(fd: number): number | null {
    try {
      const value = Number(this.buffer.toString('latin1', 0, readSync(fd, this.buffer, 0, this.buffer.length, 0)).trim());
      return Number.isFinite(value) ? value : null;
    } catch {
      return null;
    }
  }

  /** Only the host's hierarchy is read: a miss costs as much as a read (an exception each time). */
  private dir(sandboxId: string): string {
    return sandboxCgroupDir(sandboxId, this.version === 2 ? undefined : 'memory', this.root);
  }

  private close(sandboxId: string): void {
    const fd = this.files.get(sandboxId);
    this.files.delete(sandboxId);
    if (fd !== undefined) closeSync(fd);
  }
}
