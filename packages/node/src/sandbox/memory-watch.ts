import type { Logger } from '../logger.js';
import { memoryBackstopBytes } from '../runtime/gvisor-driver.js';
import type { DaemonLink } from './daemon-link.js';
import type { LiveSandboxes } from './live-sandboxes.js';

/** How often a sandbox near its limit is read: a burst must not reach the host backstop between two reads. */
const watchEveryMs = 100;
/** What the daemon's guard takes to act once asked (a call into the sandbox). */
const guardMs = 100;
/**
 * Past this share of its memory (the host's count, which adds gVisor's own ~50 MB to what the
 * sandbox sees), the sandbox's guard is asked to act; it kills only when its own count is used up.
 */
const nearLimit = 0.9;

export interface SandboxMemory {
  /** The sandbox cgroup's working set in bytes (usage less inactive file pages, read from `atLeast` on); null without a cgroup. */
  workingSet(sandboxId: string, atLeast: number): number | null;
  /** Lets go of what it holds for sandboxes no longer watched. */
  retain(watched: ReadonlySet<string>): void;
  closeAll(): void;
}

export interface MemoryWatchDeps {
  live: LiveSandboxes;
  link: Pick<DaemonLink, 'relieveMemory'>;
  /** Sandboxes' memory as their cgroups count it (CgroupMemoryReader). */
  memory: SandboxMemory;
  log: Logger;
}

/**
 * Watches every sandbox's memory from outside, where reading it is cheap (inside gVisor,
 * /proc/meminfo costs the sandbox real CPU, so nothing polls it there), and calls the daemon's
 * memory guard while a sandbox nears its memoryMb: it kills the biggest process once the memory is
 * used up, as the OOM killer gVisor lacks would, and the sandbox lives on.
 */
export class MemoryWatch {
  private timer: NodeJS.Timeout | null = null;
  /** Sandboxes whose guard call is under way: one at a time each. */
  private readonly asking = new Set<string>();
  /** When each sandbox is next read (performance.now() ms). */
  private readonly nextRead = new Map<string, number>();

  constructor(private readonly deps: MemoryWatchDeps) {}

  start(): void {
    this.timer = setInterval(() => this.check(), watchEveryMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.deps.memory.closeAll();
  }

  /** One look at every sandbox due: synchronous reads of their cgroups (microseconds each), the guard's calls in the background. */
  private check(): void {
    const now = performance.now();
    const watched = new Set<string>();
    for (const live of this.deps.live.all()) {
      const { sandboxId, memoryMb } = live.record;
      watched.add(sandboxId);
      // A sandbox busy with a checkpoint's pause or a claim is left alone: its daemon waits.
      // Read at the last tick before it is due, never after.
      if (!memoryMb || live.pendingCall || this.asking.has(sandboxId) || (this.nextRead.get(sandboxId) ?? 0) > now + watchEveryMs) continue;
      const near = memoryMb * 2 ** 20 * nearLimit;
      const bytes = this.deps.memory.workingSet(sandboxId, near);
      this.nextRead.set(sandboxId, now + readAgainAfterMs(bytes ?? 0, near, memoryBackstopBytes(memoryMb)));
      if (bytes === null || bytes < near) continue;
      this.asking.add(sandboxId);
      this.deps.link
        .relieveMemory(live.daemon)
        .then((relief) => {
          if (relief.killed)
            this.deps.log.warn(
              `sandbox ${sandboxId} of ${live.record.sessionId} ran out of its ${memoryMb} MB: killed pid ${relief.killed.pid} (${relief.killed.name}, ${relief.killed.rssMiB} MiB)`,
            );
        })
        .catch(() => undefined)
        .finally(() => this.asking.delete(sandboxId));
    }
    for (const sandboxId of this.nextRead.keys()) if (!watched.has(sandboxId)) this.nextRead.delete(sandboxId);
    this.deps.memory.retain(watched);
  }
}

/**
 * How long a sandbox using `bytes` can go unread, keeping the guarantee of a read every
 * watchEveryMs: read that often from `near` on, any growth slower than
 * (backstop - near) / (watchEveryMs + guardMs) is stopped by the guard before the host's backstop;
 * a sandbox further below is read again before growth at that rate could bring it as close. So a
 * node of many idle sandboxes does not spend its CPU reading their cgroups (20-80 us a read, more
 * with more cgroups: half of the platform's time at 700 idle sandboxes read ten times a second): an idle one
 * every 220 ms at 256 MB, 390 ms at 1 GB, up to ~610 ms for big ones. (That rate is 1.7 GB/s for a
 * 256 MB sandbox, 3 GB/s for 1 GB; a sandbox filling fresh memory as fast as it can grew
 * 200-256 MiB/s here.)
 */
export function readAgainAfterMs(bytes: number, near: number, backstop: number): number {
  const rate = (backstop - near) / (watchEveryMs + guardMs);
  return Math.max(watchEveryMs, (backstop - bytes) / rate - guardMs);
}
