import { newId, type Resources, type SandboxInfo, type StartSandboxRequest } from '@space/protocol';
import type { Logger } from '../logger.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { imageAddressesOf, type SandboxRecords } from '../sandbox-record.js';
import type { MemoryImageMeta } from '../storage/checkpoint-store.js';
import type { DaemonLink } from './daemon-link.js';
import { unclaimedPrefix, type LiveSandboxes } from './live-sandboxes.js';
import { PhaseTimer } from './phase-timer.js';
import { sessionCwdOf, sessionEnvOf } from './sandbox-booter.js';
import type { SandboxManager } from './sandbox-manager.js';
import type { SessionVolumes } from './session-volumes.js';
import type { UsageMeter } from '../usage/usage-meter.js';

/** CPU weights (cgroup cpu.shares): pooled sandboxes wait at the lowest until a session claims them. */
const defaultCpuShares = 1024;
const poolCpuShares = 2;

export interface PooledSandboxesDeps {
  manager: SandboxManager;
  live: LiveSandboxes;
  volumes: SessionVolumes;
  link: DaemonLink;
  driver: RuntimeDriver;
  records: SandboxRecords;
  runtimeDir: string;
  /** A claimed sandbox counts for its session from the claim. */
  usage: Pick<UsageMeter, 'begin'>;
  /** The disk limit of sessions that name none (`SPACE_SESSION_DISK_GB`): pooled volumes get it ahead until a claim asks for another. */
  defaultDiskGb: number;
  log: Logger;
}

/**
 * Sandboxes that serve no session yet: booted for the warm pool or for a template's memory image,
 * each on a volume named like a session that does not exist, and handed to a session by a claim.
 */
export class PooledSandboxes {
  /**
   * The disk limit (GB; undefined: none) the last claim of each template asked for (the default
   * before any): refills give their volumes that limit ahead, so a claim asking for the same
   * (sessions mostly take the platform's default) does not wait for `btrfs qgroup limit` (~5 ms, a
   * third of a pooled create).
   */
  private readonly expectedDiskGb = new Map<string, number | undefined>();
  /** The limit each unclaimed sandbox's volume has (a new volume has none). */
  private readonly diskGbOf = new Map<string, number | undefined>();

  constructor(private readonly deps: PooledSandboxesDeps) {}

  /** What the unclaimed sandbox takes of the host's memory now (its cgroup's), MB; null when it cannot be read. */
  async memoryMb(sandboxId: string): Promise<number | null> {
    const usage = await this.deps.driver.usage(sandboxId);
    return usage ? usage.memoryBytes / 2 ** 20 : null;
  }

  /** Boots a sandbox for the warm pool; returns its id. */
  async bootUnclaimed(template: string, resources: Resources): Promise<string> {
    const { deps } = this;
    const poolId = newId(unclaimedPrefix);
    await deps.volumes.create(template, poolId);
    const diskGb = this.expectedDiskGb.has(template) ? this.expectedDiskGb.get(template) : deps.defaultDiskGb;
    try {
      if (diskGb !== undefined) await deps.volumes.limitDisk(poolId, diskGb);
      // Booted at the lowest CPU weight, so refilling yields to running sandboxes; a throwaway
      // exec warms the daemon's process spawning, which is slow the first time in a new sandbox.
      // No egress settings until claimed: the gateway answers an unclaimed sandbox with 503.
      const unclaimed: StartSandboxRequest = {
        sessionId: poolId,
        template,
        env: {},
        resources,
        egress: { policy: { mode: 'deny-all', domains: [], cidrs: [] }, secrets: [] },
        services: [],
        mounts: [],
      };
      const { sandboxId } = await deps.manager.boot(unclaimed, { cpuShares: poolCpuShares });
      this.diskGbOf.set(sandboxId, diskGb);
      await deps.link.run(deps.live.get(sandboxId).daemon, ['true']);
      return sandboxId;
    } catch (err) {
      await deps.volumes.delete(poolId);
      throw err;
    }
  }

  /**
   * Hands a pooled sandbox to a session: its volume is renamed to the session's (the running
   * sandbox keeps its open directories) and given the session's disk limit (unless it has it
   * already), and the daemon gets the session's environment.
   */
  async claim(sandboxId: string, request: StartSandboxRequest): Promise<SandboxInfo> {
    const { deps } = this;
    const phases = new PhaseTimer();
    const live = await deps.manager.getAlive(sandboxId);
    const workDir = deps.records.workDir(sandboxId);
    const { diskGb } = request.resources;
    this.expectedDiskGb.set(live.record.template, diskGb);
    const limited = this.diskGbOf.get(sandboxId) === diskGb;
    this.diskGbOf.delete(sandboxId);
    const rootfs = { from: deps.volumes.path(live.record.sessionId), to: deps.volumes.path(request.sessionId) };
    deps.driver.claimed(sandboxId, defaultCpuShares);
    if (!limited) await deps.volumes.limitDisk(live.record.sessionId, diskGb);
    // Renamed after the cgroup and disk limit edits: a claim failing in those leaves no volume under
    // the session's name (the next pooled sandbox tried could not take that name).
    await deps.volumes.rename(live.record.sessionId, request.sessionId);
    live.record = {
      ...live.record,
      sessionId: request.sessionId,
      startedAt: new Date().toISOString(),
      ...(request.tenantId ? { tenantId: request.tenantId } : {}),
    };
    await Promise.all([deps.records.rewrite(live.record), deps.usage.begin(live.record)]);
    phases.mark('claim');
    // The rest goes on in the background, after this call's reply is written (each would send or
    // write ahead of it: ~0.4 ms and ~0.7 ms of a pooled create, measured); calls on the sandbox wait
    // for it like for a checkpoint (a full checkpoint among them: runsc finds the bundle edited). The
    // daemon learns the session's environment (a round trip into gVisor costs more than the rest of
    // the claim) and the bundle gets the new root path and CPU weight. If either fails, the sandbox
    // is stopped and the session's next call boots a new one on its volume. The sandbox keeps the
    // hostname it booted with (unique to it): renaming it to the session's added ~40 ms to the first
    // call and ~0.4 s to a burst of 20 creates (measured).
    const rebound = new Promise((replied) => setImmediate(replied))
      .then(() =>
        Promise.all([
          deps.link.rebind(live.daemon, { token: live.record.token, env: sessionEnvOf(request), cwd: sessionCwdOf(request), newSession: true }),
          deps.driver.rebundle(workDir, { cpuShares: defaultCpuShares, rootfs }),
        ]),
      )
      .then(() =>
        deps.log.info(
          `pooled sandbox ${sandboxId} claimed by ${request.sessionId} in ${phases.summary()}, rebound ${Math.round(phases.elapsed())} ms after the claim began`,
        ),
      )
      .catch(async (err: Error) => {
        deps.log.warn(`pooled sandbox ${sandboxId} could not finish its claim by ${request.sessionId}, stopping it: ${err.message}`);
        await deps.manager.stop(sandboxId);
      })
      .finally(() => {
        if (live.pendingCall === rebound) live.pendingCall = null;
      });
    live.pendingCall = rebound;
    return deps.manager.describe(live);
  }

  /** Resolves when the sandbox's pending work (the rest of a claim) is over, however it ended. */
  async settled(sandboxId: string): Promise<void> {
    await this.deps.live.find(sandboxId)?.pendingCall?.catch(() => undefined);
  }

  /** Stops an unclaimed sandbox and deletes its volume. */
  async discard(sandboxId: string): Promise<void> {
    this.diskGbOf.delete(sandboxId);
    const live = this.deps.live.find(sandboxId);
    if (!live) return;
    await this.deps.manager.stop(sandboxId);
    await this.deps.volumes.delete(live.record.sessionId);
  }

  /**
   * A template's image for snapshot preloading: a sandbox booted like a pooled one (daemon up and
   * warmed), its daemon's channel closed, saved by the runtime (which stops it), and its volume kept
   * as a read-only snapshot matching the memory. The sandbox and its volume are removed afterwards.
   */
  async captureTemplateImage(
    template: string,
    resources: Resources,
    target: { rootfs: string; memoryDir: string },
  ): Promise<Omit<MemoryImageMeta, 'sizeBytes'>> {
    const { deps } = this;
    const sandboxId = await this.bootUnclaimed(template, resources);
    const live = deps.live.get(sandboxId);
    try {
      await deps.link.quiesce(live.daemon);
      await deps.driver.checkpoint(sandboxId, target.memoryDir);
      await deps.volumes.snapshot(live.record.sessionId, target.rootfs);
      return { token: live.record.token, runtimeDir: deps.runtimeDir, addresses: imageAddressesOf(live.record) };
    } finally {
      await this.discard(sandboxId);
    }
  }
}
