import type { Logger } from '../logger.js';
import type { DaemonLink } from './daemon-link.js';
import type { LiveSandboxes } from './live-sandboxes.js';

/** How often every sandbox's cgroup is read: a burst must not reach the host backstop between two reads. */
const watchEveryMs = 100;
/**
 * Past this share of its memory (the host's count, which adds gVisor's own ~50 MB to what the
 * sandbox sees), the sandbox's guard is asked to act; it kills only when its own count is used up.
 */
const nearLimit = 0.9;

export interface MemoryWatchDeps {
  live: LiveSandboxes;
  link: Pick<DaemonLink, 'relieveMemory'>;
  /** The sandbox cgroup's working set in bytes (usage less inactive file pages); null without a cgroup. */
  workingSet: (sandboxId: string, atLeast: number) => number | null;
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

  constructor(private readonly deps: MemoryWatchDeps) {}

  start(): void {
    this.timer = setInterval(() => this.check(), watchEveryMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One look at every sandbox: synchronous reads of their cgroups (microseconds each), the guard's calls in the background. */
  private check(): void {
    for (const live of this.deps.live.all()) {
      const { sandboxId, memoryMb } = live.record;
      // A sandbox busy with a checkpoint's pause or a claim is left alone: its daemon waits.
      if (!memoryMb || live.pendingCall || this.asking.has(sandboxId)) continue;
      const near = memoryMb * 2 ** 20 * nearLimit;
      const bytes = this.deps.workingSet(sandboxId, near);
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
  }
}
