import { ResourcesSchema, type Resources, type StartSandboxRequest } from '@space/protocol';
import { eachAtMost, untraced } from '@space/server-kit';
import type { Logger } from './logger.js';
import { PoolDemand } from './pool-demand.js';
import type { TemplateImage, TemplateImages } from './template-images.js';

export interface WarmPoolConfig {
  /** Ready sandboxes kept per template at least (`SPACE_POOL_SIZE`, default 2; 0 turns pooling off). */
  size: number;
  /**
   * Memory all pooled sandboxes may take together (`SPACE_POOL_MAX_MEMORY_MB`, default 3072: a burst
   * of 100 at 24 MB each): the pool grows past `size` with demand up to this budget. 0 keeps it at `size`.
   */
  maxMemoryMb: number;
  /**
   * Host memory one idle pooled sandbox takes, for the budget (`SPACE_POOL_SANDBOX_MEMORY_MB`; measured by bench/footprint.mjs):
   * at least; a template whose ready sandboxes were measured to take more (a code interpreter's warm kernel) counts that.
   */
  sandboxMemoryMb: number;
  /** What counts as one burst of demand (default 60 s): the pool keeps as many ready as were asked for in that time. */
  demandWindowMs?: number;
  /** How long a burst is remembered, fading out (`SPACE_POOL_DEMAND_MEMORY_SEC`, default 600 s): a repeat within it finds the pool ready. */
  demandMemoryMs: number;
  /**
   * Templates with a pool (`SPACE_POOL_TEMPLATES`, default every template prepared at start). A
   * tenant's template version (`tpl_…`) gets one too, from its first demand, while the pool sizes
   * itself (`maxMemoryMb` > 0): as many as its recent demand, none once that is gone.
   */
  templates: string[];
  /** Pause between two refill boots, so refilling leaves CPU to running sandboxes (`SPACE_POOL_REFILL_DELAY_MS`, default 500). */
  refillDelayMs: number;
  /** Snapshot preloading: a memory image per pooled template for when the pool is empty (`SPACE_TEMPLATE_IMAGES`, default 0). */
  templateImages: boolean;
}

/** What the pool needs to boot and drop the sandboxes it keeps (the node's PooledSandboxes). */
export interface PoolSandboxes {
  /** Boots a sandbox that serves no session yet; returns its id. */
  bootUnclaimed(template: string, resources: Resources): Promise<string>;
  /** Resolves once a claimed sandbox has taken its session (the daemon's part of the claim runs after the claim returns). */
  settled(sandboxId: string): Promise<void>;
  /** Stops an unclaimed sandbox and deletes its volume. */
  discard(sandboxId: string): Promise<void>;
  /** What the unclaimed sandbox takes of the host's memory now (its cgroup's), MB; null when it cannot be read. */
  memoryMb(sandboxId: string): Promise<number | null>;
}

/** Pooled sandboxes run with the default resources; a session asking for others boots its own. */
const poolResources: Resources = ResourcesSchema.parse({});

const defaultDemandWindowMs = 60_000;
/** The longest a refill boot waits for the node's starts to end. */
const startsWaitMs = 10_000;
/** Ready sandboxes discarded at once when the pool stops. */
const discardsAtOnce = 8;

/**
 * Ready sandboxes per template (agent up, network set, fresh hostname and machine id), handed to
 * new sessions in a few milliseconds instead of a boot (the SandboxStarter takes one and claims it
 * for the session). The pool sizes itself: it keeps at least `size` per template, and as many as
 * the largest recent burst of demand asked for (`PoolDemand`), within the memory budget; it shrinks
 * back, a window at a time, as the burst fades from memory. Refilled one sandbox at a time, with a
 * pause between boots while the pool is at least half full, so a refill cannot take both cores from
 * running sandboxes but keeps up with a burst. Before the first pooled sandbox of a template, its memory image is built (`images`): the
 * fallback when the pool is empty.
 */
export class WarmPool {
  private readonly ready = new Map<string, string[]>();
  /** The most a ready sandbox of each template was measured to take, MB (once booted, before each refill boot, and when taken). */
  private readonly measuredMb = new Map<string, number>();
  private readonly configured: Set<string>;
  private readonly demand: PoolDemand;
  private readonly demandWindowMs: number;
  private trimTimer: NodeJS.Timeout | null = null;
  /** Templates whose image was attempted in this run (built or failed: not retried in a loop). */
  private readonly imagesTried = new Set<string>();
  private refilling: Promise<void> | null = null;
  private stopped = false;
  private stopNow: () => void = () => undefined;
  /** Resolves when `stop()` is called: a refill waiting for the node's starts waits no more. */
  private readonly stopping = new Promise<void>((resolve) => (this.stopNow = resolve));

  constructor(
    private readonly config: WarmPoolConfig,
    private readonly sandboxes: PoolSandboxes,
    private readonly images: TemplateImages | null,
    private readonly log: Logger,
    /**
     * Resolves once no session's sandbox is starting on the node (`SandboxStarter.settle`). A refill
     * boot waits for it, at most `startsWaitMs`: in a burst, its creates' own boots and claims (and
     * the first calls, which wait for a claim's rebind) go first; measured in docs/benchmarks.md.
     */
    private readonly startsSettled: () => Promise<void> = async () => undefined,
  ) {
    for (const template of config.templates) this.ready.set(template, []);
    this.configured = new Set(config.templates);
    this.demandWindowMs = config.demandWindowMs ?? defaultDemandWindowMs;
    this.demand = new PoolDemand(this.demandWindowMs, config.demandMemoryMs);
  }

  /** Starts filling the pools in the background. */
  start(): void {
    this.refill();
  }

  /** A ready sandbox for the session to claim (taken out of the pool), or null when none fits (other resources, empty pool). */
  take(request: StartSandboxRequest): string | null {
    if (!sameResources(request.resources, poolResources)) return null;
    const ready = this.ready.get(request.template) ?? this.adopt(request.template);
    if (!ready) return null;
    this.demand.record(request.template);
    this.trimLater();
    const sandboxId = ready.shift() ?? null;
    if (!sandboxId) this.refill();
    // As it sat in the pool: what a template's sandbox grows to once booted (a kernel started at boot) counts from now on.
    else void this.measure(request.template, sandboxId);
    return sandboxId;
  }

  /**
   * How many ready sandboxes the template should have now: the burst its recent demand asks to be
   * ready for, within the memory budget, at least `size` for a configured template (none for a
   * tenant's one nobody asks for).
   */
  target(template: string): number {
    const { size, maxMemoryMb } = this.config;
    if (size === 0) return 0;
    if (maxMemoryMb <= 0) return size;
    const others = [...this.ready].reduce((mb, [t, ids]) => (t === template ? mb : mb + ids.length * this.costMb(t)), 0);
    const room = Math.floor((maxMemoryMb - others) / this.costMb(template));
    return Math.max(this.configured.has(template) ? size : 0, Math.min(this.demand.burst(template), room));
  }

  /** What one ready sandbox of the template counts for in the budget, MB. */
  costMb(template: string): number {
    return Math.max(1, this.config.sandboxMemoryMb, this.measuredMb.get(template) ?? 0);
  }

  private async measure(template: string, sandboxId: string): Promise<void> {
    const mb = await this.sandboxes.memoryMb(sandboxId).catch(() => null);
    if (mb === null || mb <= (this.measuredMb.get(template) ?? 0)) return;
    const before = this.costMb(template);
    this.measuredMb.set(template, Math.ceil(mb));
    if (this.costMb(template) > before)
      this.log.info(
        `warm pool: a ready ${template} sandbox takes ${this.costMb(template)} MB, counted so in SPACE_POOL_MAX_MEMORY_MB (${this.config.maxMemoryMb})`,
      );
  }

  /** A tenant's template version asked for: pooled from now on while the pool sizes itself (null otherwise). */
  private adopt(template: string): string[] | null {
    if (!template.startsWith('tpl_') || this.config.size === 0 || this.config.maxMemoryMb <= 0 || this.stopped) return null;
    const ready: string[] = [];
    this.ready.set(template, ready);
    return ready;
  }

  /** A tenant's template version was deleted: its ready sandboxes go, and it has no pool any more. */
  async forget(template: string): Promise<void> {
    const ids = this.ready.get(template);
    if (!ids || this.configured.has(template)) return;
    this.ready.delete(template);
    for (const id of ids.splice(0)) await this.sandboxes.discard(id).catch(() => undefined);
  }

  /**
   * A taken sandbox was claimed. The refill starts once it has its session: a boot's work (btrfs,
   * ip, iptables, runsc, gVisor's start) would delay the claim and the daemon's rebind, which the
   * session's first call waits for.
   */
  claimed(sandboxId: string): void {
    void this.sandboxes.settled(sandboxId).then(() => this.refill());
  }

  /** A taken sandbox could not be claimed: it is discarded and replaced. */
  async reject(sandboxId: string): Promise<void> {
    await this.sandboxes.discard(sandboxId).catch(() => undefined);
    this.refill();
  }

  /** The template's memory image for a session the pool cannot serve right now, if it fits. */
  image(request: StartSandboxRequest): TemplateImage | null {
    if (!this.ready.has(request.template) || !sameResources(request.resources, poolResources)) return null;
    return this.images?.get(request.template) ?? null;
  }

  /** Templates whose memory image is built. */
  imagesReady(): string[] {
    return [...this.ready.keys()].filter((template) => this.images?.has(template));
  }

  /** How many ready sandboxes each template has. */
  sizes(): Record<string, number> {
    return Object.fromEntries([...this.ready].map(([template, ids]) => [template, ids.length]));
  }

  /** Stops refilling and discards every ready sandbox. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopNow();
    if (this.trimTimer) clearTimeout(this.trimTimer);
    await this.refilling?.catch(() => undefined);
    // A few at a time: one after another, a pool of 128 took over 10 s to stop.
    const ids = [...this.ready.values()].flatMap((ready) => ready.splice(0));
    await eachAtMost(ids, discardsAtOnce, (id) => this.sandboxes.discard(id).catch(() => undefined));
    await this.images?.clear();
  }

  private refill(): void {
    if (this.refilling || this.stopped) return;
    // Started by a claim, but not part of it: its boots are not the caller's trace.
    this.refilling = untraced(() => this.fill()).finally(() => (this.refilling = null));
  }

  private async fill(): Promise<void> {
    await this.buildImages();
    if (this.config.size === 0) return;
    for (;;) {
      await this.afterStarts();
      const template = [...this.ready].find(([t, ids]) => ids.length < this.target(t))?.[0];
      if (!template || this.stopped) return;
      // Its oldest ready sandbox again, grown since its boot (a kernel the code interpreter starts then): the budget counts that before this boot.
      const oldest = this.ready.get(template)?.[0];
      if (oldest) {
        await this.measure(template, oldest);
        if ((this.ready.get(template)?.length ?? 0) >= this.target(template)) continue;
      }
      try {
        const sandboxId = await this.sandboxes.bootUnclaimed(template, poolResources);
        // Stopped, or the template forgotten (deleted) while it booted: not kept.
        const ready = this.ready.get(template);
        if (this.stopped || !ready) {
          await this.sandboxes.discard(sandboxId);
          if (this.stopped) return;
          continue;
        }
        ready.push(sandboxId);
        await this.measure(template, sandboxId);
      } catch (err) {
        this.log.warn(`warm pool: booting a ${template} sandbox failed, retrying later: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 5000));
      }
      // Demand is outrunning the pool: the next boot goes at once.
      if ((this.ready.get(template)?.length ?? 0) * 2 >= this.target(template)) await new Promise((r) => setTimeout(r, this.config.refillDelayMs));
    }
  }

  /** A window after the last take (and every window while above the minimum), discards ready sandboxes beyond each template's target. */
  private trimLater(): void {
    if (this.trimTimer || this.config.maxMemoryMb <= 0) return;
    this.trimTimer = setTimeout(() => {
      this.trimTimer = null;
      void this.trim();
    }, this.demandWindowMs + 100);
    this.trimTimer.unref();
  }

  /** Until no sandbox is starting, or `startsWaitMs` (a node always starting some still refills its pool), or the pool stops. */
  private async afterStarts(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.startsSettled(), new Promise<void>((r) => (timer = setTimeout(r, startsWaitMs))), this.stopping]);
    clearTimeout(timer);
  }

  private async trim(): Promise<void> {
    if (this.stopped) return;
    let above = false;
    for (const [template, ids] of this.ready) {
      const extra = ids.length - this.target(template);
      for (const id of extra > 0 ? ids.splice(0, extra) : []) await this.sandboxes.discard(id).catch(() => undefined);
      above ||= ids.length > (this.configured.has(template) ? this.config.size : 0);
      // A tenant's template nobody asked for lately has no pool until it is asked for again.
      if (!this.configured.has(template) && ids.length === 0 && this.target(template) === 0) this.ready.delete(template);
    }
    if (above) this.trimLater();
  }

  /** Builds each template's image once per run, one at a time like the pool's boots. */
  private async buildImages(): Promise<void> {
    if (!this.images) return;
    for (const template of this.ready.keys()) {
      if (this.stopped || this.imagesTried.has(template)) continue;
      this.imagesTried.add(template);
      await this.images
        .build(template, poolResources)
        .catch((err: Error) => this.log.warn(`template image of ${template} not built (new sessions boot when the pool is empty): ${err.message}`));
      await new Promise((r) => setTimeout(r, this.config.refillDelayMs));
    }
  }
}

function sameResources(a: Resources, b: Resources): boolean {
  return a.memoryMb === b.memoryMb && a.cpus === b.cpus && a.pids === b.pids;
}
