import type { IncomingMessage } from 'node:http';
import { ErrorCode, SpaceError, type TenantLimitName, type TenantLimitsView } from '@space/protocol';
import type { Authenticator } from './auth.js';
import { CreateQueue } from './create-queue.js';
import { InFlight } from './in-flight.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Store } from '../store/store.js';
import { RecentUsage } from './recent-usage.js';
import { TokenBuckets } from './token-buckets.js';

export interface TenantLimitOptions {
  /** Creations of one tenant that may wait for room under `maxConcurrentCreates` (`SPACE_TENANT_MAX_QUEUED_CREATES`); 0: none wait. */
  maxQueuedCreates: number;
  /** How long a creation may wait for room, ms. */
  createQueueWaitMs: number;
  /** Calls of one tenant under way at once in this control-plane process (`SPACE_TENANT_MAX_REQUESTS`). */
  maxRequests: number;
  /** Open streams (exec, PTY, attach, watch) of one tenant in this process (`SPACE_TENANT_MAX_STREAMS`). */
  maxStreams: number;
  /** Calls and stream openings per second of one tenant in this process, with bursts of twice as many (`SPACE_TENANT_REQUESTS_PER_SEC`). */
  requestsPerSec: number;
  /** Sessions one tenant may have, whatever their status (`SPACE_TENANT_MAX_SESSIONS`). */
  maxSessions: number;
  /** Session creations and forks of one tenant under way at once in this process (`SPACE_TENANT_MAX_CONCURRENT_CREATES`). */
  maxConcurrentCreates: number;
  /** Memory images the tenant's full checkpoints may hold together, GB (`SPACE_TENANT_MAX_CHECKPOINT_GB`). */
  maxCheckpointGb: number;
}

export const defaultTenantLimits: TenantLimitOptions = {
  maxRequests: 256,
  maxStreams: 64,
  requestsPerSec: 100,
  maxSessions: 200,
  maxConcurrentCreates: 16,
  maxQueuedCreates: 1000,
  createQueueWaitMs: 120_000,
  maxCheckpointGb: 100,
};

/** The setting that raises each limit, named in every refusal (and declared under that name in settings.ts). */
export const limitSettings: Record<TenantLimitName, string> = {
  sessions: 'SPACE_TENANT_MAX_SESSIONS',
  concurrentCreates: 'SPACE_TENANT_MAX_CONCURRENT_CREATES',
  requestsPerSec: 'SPACE_TENANT_REQUESTS_PER_SEC',
  openRequests: 'SPACE_TENANT_MAX_REQUESTS',
  openStreams: 'SPACE_TENANT_MAX_STREAMS',
  checkpointStorageBytes: 'SPACE_TENANT_MAX_CHECKPOINT_GB',
};

const gb = 1024 ** 3;

/**
 * Holds every tenant to its limits, so one tenant cannot take what the platform has for all: what it
 * keeps (sessions, checkpoint storage: QUOTA_EXCEEDED, 403) and what it does at once or per second
 * (calls, streams, creations: TOO_MANY_REQUESTS, 429 with Retry-After). Every refusal names the
 * limit, its value and the setting that raises it; nothing is lost by one. What is kept is counted
 * in the store. Rates and concurrency are counted per process, each of the `replicas()` control
 * planes sharing the store holding a tenant to its share of them (the limit divided among them,
 * rounded up): across the cluster a tenant gets at most its limit (plus the rounding: fewer than one
 * per replica), and through any one replica at least that replica's share.
 */
export class TenantLimits {
  private readonly open = new InFlight();
  private readonly rate: TokenBuckets;
  private readonly createQueue = new CreateQueue();

  /** Tenants' session counts as last read, with what this control plane created since (`checkSessions`). */
  private readonly sessionCounts: RecentUsage;
  /** Tenants' checkpoint storage as last read, with the images allowed since at their largest (`checkCheckpointStorage`). */
  private readonly checkpointBytes: RecentUsage;

  constructor(
    private readonly auth: Authenticator,
    private readonly store: Store,
    private readonly metrics: Metrics,
    private readonly options: TenantLimitOptions = defaultTenantLimits,
    now: () => number = Date.now,
    /** How many control planes share the limits (the roster's size; 1 alone). */
    private readonly replicas: () => number = () => 1,
  ) {
    this.sessionCounts = new RecentUsage(now);
    this.checkpointBytes = new RecentUsage(now);
    this.rate = new TokenBuckets(options.requestsPerSec, options.requestsPerSec * 2, now, () => 1 / this.replicas());
  }

  /** This process's share of a limit on what tenants do at once. */
  private share(max: number): number {
    return Math.max(1, Math.ceil(max / this.replicas()));
  }

  /** How a refusal names the share of a limit one control plane holds, when several share it. */
  private ofShare(max: number): string {
    const n = this.replicas();
    return n > 1 ? ` (${this.share(max)} through this control plane, one of ${n} sharing the limit)` : '';
  }

  /** The router's admission hook: the tenant's request rate, then its calls or streams open at once. */
  readonly admit = async (req: IncomingMessage, kind: 'request' | 'stream'): Promise<() => void> => {
    let tenantId: string;
    try {
      tenantId = (await this.auth.authenticate(req)).tenantId;
    } catch {
      // Refused by the route's own authentication; not counted.
      return () => undefined;
    }
    const waitMs = this.rate.take(tenantId);
    if (waitMs > 0) {
      const rate = this.options.requestsPerSec;
      const n = this.replicas();
      const ofShare = n > 1 ? ` (${+(rate / n).toFixed(2)} through this control plane, one of ${n} sharing the limit)` : '';
      throw this.refusal('requestsPerSec', rate, `${rate} calls per second${ofShare}`, Math.ceil(waitMs / 1000));
    }
    const limit: TenantLimitName = kind === 'request' ? 'openRequests' : 'openStreams';
    const max = kind === 'request' ? this.options.maxRequests : this.options.maxStreams;
    const key = `${kind}:${tenantId}`;
    if (this.open.count(key) >= this.share(max))
      throw this.refusal(limit, max, `${max} ${kind === 'request' ? 'calls' : 'streams'} open at once${this.ofShare(max)}`, 1);
    return this.open.begin(key);
  };

  /** Runs `work` as `count` creations of the tenant under way, once admitted (see `admitCreates`). */
  async whileCreating<T>(tenantId: string, count: number, work: () => Promise<T>): Promise<T> {
    const done = await this.admitCreates(tenantId, count);
    try {
      return await work();
    } finally {
      done();
    }
  }

  /**
   * Admits `count` creations at once (a create, or a fork of `count`); the sessions they add are
   * checked by the services that make them. Returns the function that ends the creations.
   */
  beginCreates(tenantId: string, count: number): () => void {
    const max = this.options.maxConcurrentCreates;
    if (!this.roomForCreates(tenantId, count))
      throw this.refusal('concurrentCreates', max, `${max} session creations under way at once${this.ofShare(max)}`, 1);
    const ends = Array.from({ length: count }, () => this.open.begin(`create:${tenantId}`));
    return () => {
      for (const end of ends) end();
      this.createQueue.pump(
        tenantId,
        (n) => this.roomForCreates(tenantId, n),
        (n) => this.beginCreates(tenantId, n),
      );
    };
  }

  /**
   * Admits `count` creations: at once when the tenant has room under its limit on creations at
   * once and none of its creations waits; else after those waiting, first come first served (at most
   * `maxQueuedCreates` waiting, each for `createQueueWaitMs`). TOO_MANY_REQUESTS past either, and
   * at once for more than the limit (a fork of more sessions than may be created at once).
   */
  async admitCreates(tenantId: string, count: number): Promise<() => void> {
    const max = this.options.maxConcurrentCreates;
    const waiting = this.createQueue.waiting(tenantId);
    if ((waiting === 0 && this.roomForCreates(tenantId, count)) || count > this.share(max)) return this.beginCreates(tenantId, count);
    const queueMax = this.options.maxQueuedCreates;
    if (waiting + count > queueMax)
      throw this.refusal('concurrentCreates', max, `${max} session creations under way at once${this.ofShare(max)} and ${queueMax} waiting for room`, 1);
    this.metrics.inc('creates_queued');
    const waitSec = +(this.options.createQueueWaitMs / 1000).toFixed(1);
    return this.createQueue.wait(tenantId, count, this.options.createQueueWaitMs, () =>
      this.refusal('concurrentCreates', max, `${max} session creations under way at once${this.ofShare(max)}; this one waited ${waitSec} s for room`, 1),
    );
  }

  private roomForCreates(tenantId: string, count: number): boolean {
    return this.open.count(`create:${tenantId}`) + count <= this.share(this.options.maxConcurrentCreates);
  }

  /** Refuses when the tenant's sessions and `adding` more would pass its maximum. */
  async checkSessions(tenantId: string, adding = 0): Promise<void> {
    const max = this.options.maxSessions;
    // Far below its maximum (under half, counted within the last second), a tenant's sessions are
    // not read again (one statement per creation saved). Each check is for new sessions: `adding`,
    // or the one its caller just inserted.
    if (this.sessionCounts.stands(tenantId, Math.max(adding, 1), max / 2)) return;
    const sessions = await this.store.countSessions(tenantId);
    if (sessions + adding > max) {
      throw this.refusal('sessions', max, `${max} sessions; delete some (their checkpoints go with them)`);
    }
    this.sessionCounts.record(tenantId, sessions + adding);
  }

  /**
   * Refuses a new memory image (of at most `upToBytes`: the sandbox's memory) when the tenant's full
   * checkpoints already hold their maximum. Read within the last second, with the images allowed
   * since counted at their largest, and under half of it, the sum is not read again.
   */
  async checkCheckpointStorage(tenantId: string, upToBytes: number): Promise<void> {
    const max = this.options.maxCheckpointGb * gb;
    if (this.checkpointBytes.stands(tenantId, upToBytes, max / 2)) return;
    const used = await this.store.checkpointBytes(tenantId);
    this.checkpointBytes.record(tenantId, used + upToBytes);
    if (used >= max) {
      throw this.refusal(
        'checkpointStorageBytes',
        max,
        `${this.options.maxCheckpointGb} GB of memory images (${(used / gb).toFixed(2)} GB now); delete full checkpoints`,
      );
    }
  }

  /** What the tenant may hold and do, and what it holds and does now (in this process). */
  async view(tenantId: string): Promise<Omit<TenantLimitsView, 'defaultDiskGb'>> {
    const used: Record<TenantLimitName, number> = {
      sessions: await this.store.countSessions(tenantId),
      concurrentCreates: this.open.count(`create:${tenantId}`),
      requestsPerSec: this.rate.used(tenantId),
      openRequests: this.open.count(`request:${tenantId}`),
      openStreams: this.open.count(`stream:${tenantId}`),
      checkpointStorageBytes: await this.store.checkpointBytes(tenantId),
    };
    const max = this.maxima();
    const limits = Object.fromEntries(
      (Object.keys(max) as TenantLimitName[]).map((name) => [name, { max: max[name], used: used[name], setting: limitSettings[name] }]),
    );
    return { tenantId, limits };
  }

  /** The configured maximum of every limit, for /metrics. */
  gauges(): Record<string, number> {
    return Object.fromEntries(Object.entries(this.maxima()).map(([name, value]) => [`space_tenant_limit{limit="${name}"}`, value]));
  }

  private maxima(): Record<TenantLimitName, number> {
    const o = this.options;
    return {
      sessions: o.maxSessions,
      concurrentCreates: o.maxConcurrentCreates,
      requestsPerSec: o.requestsPerSec,
      openRequests: o.maxRequests,
      openStreams: o.maxStreams,
      checkpointStorageBytes: o.maxCheckpointGb * gb,
    };
  }

  /** QUOTA_EXCEEDED for what a tenant keeps, TOO_MANY_REQUESTS (with when to retry) for what it does at once. */
  private refusal(limit: TenantLimitName, max: number, what: string, retryAfterSec?: number): SpaceError {
    this.metrics.inc('requests_refused', { reason: limit });
    const setting = limitSettings[limit];
    const code = retryAfterSec === undefined ? ErrorCode.QUOTA_EXCEEDED : ErrorCode.TOO_MANY_REQUESTS;
    const then = retryAfterSec === undefined ? '' : `; retry in ${retryAfterSec} s`;
    return new SpaceError(code, `tenant limit "${limit}" reached: at most ${what}${then} (the operator raises it with ${setting})`, {
      limit,
      max,
      setting,
      ...(retryAfterSec === undefined ? {} : { retryAfterSec }),
    });
  }
}
