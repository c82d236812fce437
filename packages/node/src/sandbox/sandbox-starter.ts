import { CodeContextListSchema, type SandboxInfo, type StartSandboxRequest } from '@space/protocol';
import { type KeyedQueue, SingleFlight } from '@space/server-kit';
import type { EgressGateway } from '../gateway/egress-gateway.js';
import type { Logger } from '../logger.js';
import type { HostDiskWatch } from '../storage/host-disk.js';
import type { TemplateImage } from '../template-images.js';
import type { WarmPool } from '../warm-pool.js';
import { PhaseTimer } from './phase-timer.js';
import type { PooledSandboxes } from './pooled-sandboxes.js';
import type { SandboxManager } from './sandbox-manager.js';
import type { SessionVolumes } from './session-volumes.js';
import type { NamedVolumes } from '../storage/named-volumes.js';

/** Where a session's sandbox came from, counted for /metrics: how often the pool and the images serve. */
export type StartOrigin = 'pool' | 'template-image' | 'checkpoint' | 'boot';

export interface SandboxStarterDeps {
  manager: SandboxManager;
  pooled: PooledSandboxes;
  volumes: SessionVolumes;
  namedVolumes: Pick<NamedVolumes, 'check'>;
  /** The warm pool, or null when pooling is off. */
  pool: WarmPool | null;
  sessionQueue: KeyedQueue;
  /** The gateway learns a session's policy and secrets before its sandbox can send anything. */
  egress: Pick<EgressGateway, 'configure'>;
  /** New sessions are refused while the host disk under the node's storage is below its reserve. */
  hostDisk: Pick<HostDiskWatch, 'refuseIfLow'>;
  log: Logger;
}

/**
 * Starts a session's sandbox from the fastest source that fits, in this order: a new session takes
 * a pooled sandbox, else is restored from its template's memory image, else gets a new volume; then
 * a memory image left pending by a restore or fork restores the sandbox with its processes; else it
 * boots. It sits above the manager and the pool and is the only part that uses both.
 */
export class SandboxStarter {
  private readonly starting = new SingleFlight<SandboxInfo>();
  private readonly starts: Record<StartOrigin, number> = { pool: 0, 'template-image': 0, checkpoint: 0, boot: 0 };

  constructor(private readonly deps: SandboxStarterDeps) {}

  /** Starts a sandbox for a session, or returns the one already serving it. */
  async start(request: StartSandboxRequest): Promise<SandboxInfo> {
    const { manager, sessionQueue } = this.deps;
    // Refused before anything is set up for the session (its template matters only for a new volume).
    await this.deps.volumes.checkTemplate(request.sessionId, request.template);
    for (const mount of request.mounts) await this.deps.namedVolumes.check(mount.volumeId);
    this.deps.egress.configure(request.sessionId, request.egress);
    const existing = manager.forSession(request.sessionId);
    if (existing) return manager.describe(existing);
    return this.starting.run(request.sessionId, () =>
      sessionQueue.run(request.sessionId, async () => {
        // Looked up again in the queue: a start before this one may have finished meanwhile.
        const started = manager.forSession(request.sessionId);
        return started ? manager.describe(started) : this.withServices(request, await this.startNew(request));
      }),
    );
  }

  startCounts(): Record<StartOrigin, number> {
    return { ...this.starts };
  }

  /** Resolves once no start is under way, those begun meanwhile included (before the node stops its sandboxes; before a pool refill boots). */
  async settle(): Promise<void> {
    for (let starts = this.starting.all(); starts.length > 0; starts = this.starting.all()) await Promise.all(starts.map((p) => p.catch(() => undefined)));
  }

  /** A sandbox whose processes are not the session's own (not restored from its memory) gets the session's services. */
  private async withServices(request: StartSandboxRequest, info: SandboxInfo): Promise<SandboxInfo> {
    if (info.restoredFrom || request.services.length === 0) return info;
    const failed = await this.deps.manager.startServices(info.sandboxId, request.services);
    if (failed.length === 0) return info;
    const note = `services that did not start: ${failed.join('; ')}`;
    return { ...info, note: info.note ? `${info.note}; ${note}` : note };
  }

  /** A sandbox restored from memory says in its history which cell each code context's kernel went back to (when it has any). */
  private async withKernelNote(info: SandboxInfo): Promise<SandboxInfo> {
    const reply = await this.deps.manager
      .get(info.sandboxId)
      .daemon.json('GET', '/code-state', undefined, CodeContextListSchema, { timeoutMs: 3000 })
      .catch(() => null);
    if (!reply?.contexts.length) return info;
    const note = `code contexts back at: ${reply.contexts.map((c) => `${c.id} (${c.language}) cell ${c.executionCount}`).join(', ')}`;
    return { ...info, note: info.note ? `${info.note}; ${note}` : note };
  }

  private async startNew(request: StartSandboxRequest): Promise<SandboxInfo> {
    const { manager, volumes } = this.deps;
    const phases = new PhaseTimer();
    // Pooled sandboxes and template images run already: they cannot gain the session's mounts.
    const prestarted = request.mounts.length === 0;
    if (!(await volumes.exists(request.sessionId))) {
      this.deps.hostDisk.refuseIfLow('a new session');
      // A pooled sandbox's claim gives its volume the session's disk limit.
      const pooled = prestarted ? await this.fromPool(request) : null;
      if (pooled) return this.counted('pool', pooled);
      const image = prestarted ? this.deps.pool?.image(request) : undefined;
      const restored = image ? await this.fromTemplateImage(request, image, phases) : null;
      if (restored) return this.counted('template-image', restored);
      await volumes.create(request.template, request.sessionId);
    }
    await volumes.limitDisk(request.sessionId, request.resources.diskGb);
    const pending = await volumes.takePendingStart(request.sessionId);
    phases.mark('volume');
    let note = pending && 'note' in pending ? pending.note : null;
    if (pending && !('note' in pending)) {
      try {
        return this.counted('checkpoint', await this.withKernelNote(await manager.boot(request, { memory: pending }, phases)));
      } catch (err) {
        // The volume already holds the checkpoint's files: a fresh boot on it loses only the processes.
        this.deps.log.warn(`restoring ${request.sessionId} from ${pending.label} failed, booting fresh instead: ${(err as Error).message}`);
        note = `restoring ${pending.label} failed (${(err as Error).message.slice(0, 300)}); the sandbox booted on the checkpoint's files, its processes did not continue`;
      }
    }
    return this.counted('boot', await manager.boot(request, { note }, phases));
  }

  /** A pooled sandbox claimed for the session; one that cannot be claimed is discarded and the next tried. */
  private async fromPool(request: StartSandboxRequest): Promise<SandboxInfo | null> {
    const { pool, pooled, log } = this.deps;
    if (!pool) return null;
    for (let sandboxId = pool.take(request); sandboxId; sandboxId = pool.take(request)) {
      try {
        const claimed = await pooled.claim(sandboxId, request);
        pool.claimed(sandboxId);
        return claimed;
      } catch (err) {
        log.warn(`pooled sandbox ${sandboxId} could not be claimed, trying the next: ${(err as Error).message}`);
        await pool.reject(sandboxId);
      }
    }
    return null;
  }

  /**
   * Snapshot preloading: the session's volume is a writable snapshot of the image's, and its sandbox
   * is restored from the image's memory (daemon already up). Null if that fails: nothing is left.
   */
  private async fromTemplateImage(request: StartSandboxRequest, image: TemplateImage, phases: PhaseTimer): Promise<SandboxInfo | null> {
    const { manager, volumes } = this.deps;
    await volumes.createFrom(image.rootfs, request.sessionId);
    await volumes.limitDisk(request.sessionId, request.resources.diskGb);
    phases.mark('volume');
    try {
      return await manager.boot(
        request,
        { memory: { checkpointId: null, label: `the ${image.template} template's image`, dir: image.memoryDir, meta: image.meta, newSession: true } },
        phases,
      );
    } catch (err) {
      this.deps.log.warn(`restoring ${request.sessionId} from the ${image.template} template's image failed, booting instead: ${(err as Error).message}`);
      await volumes.delete(request.sessionId);
      return null;
    }
  }

  private counted(origin: StartOrigin, info: SandboxInfo): SandboxInfo {
    this.starts[origin]++;
    return info;
  }
}
