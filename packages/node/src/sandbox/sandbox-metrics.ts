import { ErrorCode, SpaceError, type SandboxMetrics } from '@space/protocol';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { SandboxManager } from './sandbox-manager.js';
import type { SessionVolumes } from './session-volumes.js';

/** CPU use is the difference of two readings this far apart. */
const cpuWindowMs = 200;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What a running sandbox uses now: CPU over a short window and memory from its cgroup, disk from its volume's quota group. */
export class SandboxMetricsReader {
  constructor(
    private readonly manager: Pick<SandboxManager, 'getAlive'>,
    private readonly driver: Pick<RuntimeDriver, 'usage'>,
    private readonly volumes: Pick<SessionVolumes, 'diskUsage'>,
  ) {}

  async read(sandboxId: string): Promise<SandboxMetrics> {
    const { record } = await this.manager.getAlive(sandboxId);
    const gone = () => new SpaceError(ErrorCode.SANDBOX_NOT_FOUND, `sandbox ${sandboxId} has no cgroup: it stopped`);
    const first = await this.driver.usage(sandboxId);
    if (!first) throw gone();
    const started = process.hrtime.bigint();
    await sleep(cpuWindowMs);
    const second = await this.driver.usage(sandboxId);
    if (!second) throw gone();
    const elapsedNs = Number(process.hrtime.bigint() - started);
    const cpuCount = second.cpuCount ?? 1;
    const disk = await this.volumes.diskUsage(record.sessionId);
    return {
      sampledAt: new Date().toISOString(),
      cpuCount,
      cpuUsedPct: Math.round((Math.max(0, second.cpuNanos - first.cpuNanos) / elapsedNs / cpuCount) * 1000) / 10,
      memoryBytes: second.memoryBytes,
      // What the sandbox may use before its biggest process is killed, not the host's backstop above it.
      memoryLimitBytes: record.memoryMb ? record.memoryMb * 2 ** 20 : second.memoryLimitBytes,
      diskBytes: disk?.bytes ?? null,
      diskLimitBytes: disk?.limitBytes ?? null,
    };
  }
}
