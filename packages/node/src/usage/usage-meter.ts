import { type EgressAuditEntry, type NodeUsageEntry, NodeUsageEntrySchema } from '@space/protocol';
import type { Logger } from '../logger.js';
import type { SandboxRecord } from '../sandbox-record.js';
import { isUnclaimed, type LiveSandboxes } from '../sandbox/live-sandboxes.js';
import { type UsageLedger, maxPendingBatches } from './usage-ledger.js';

/** What a session used in the open period, unrounded. */
type Accrued = Omit<NodeUsageEntry, 'sessionId' | 'tenantId'>;

const nothing = (): Accrued => ({
  cpuMicros: 0,
  memoryKibSeconds: 0,
  diskKibSeconds: 0,
  egressBytesOut: 0,
  egressBytesIn: 0,
  egressRequests: 0,
  sandboxMs: 0,
});

export interface UsageMeterDeps {
  live: Pick<LiveSandboxes, 'all'>;
  /** The sandbox cgroup's CPU time so far and memory now; null without a cgroup. */
  cgroup: (sandboxId: string) => Promise<{ cpuNanos: number; memoryBytes: number } | null>;
  /** Bytes of every session's volume on the node; null where quotas are off. */
  volumeBytes: () => Promise<Map<string, number> | null>;
  ledger: UsageLedger;
  /** How often sandboxes are read and a batch closed (`SPACE_USAGE_SAMPLE_SEC`). */
  sampleMs: number;
  log: Logger;
  now?: () => number;
}

/**
 * Measures what each session uses on this node: every `sampleMs` it reads each sandbox's cgroup
 * (CPU time as the counter's difference since the last reading; memory and sandbox time
 * integrated over the interval) and the volumes' sizes, adds what the gateway reported since, and
 * closes a batch into the ledger, which control planes collect (`GET /node/v1/usage`). A sandbox
 * is read once more as it stops (`end`), and a claimed pooled sandbox counts from its claim
 * (`begin`): the pool's own use is nobody's.
 *
 * Bounds: CPU is exact while the node agent runs, and survives its restart (the baselines are on
 * disk); memory and disk are sampled (their changes between two readings are not seen); a node
 * agent that dies loses the open period (at most `sampleMs`) of time, memory, disk and egress; a
 * connection through the gateway is counted when it ends.
 */
export class UsageMeter {
  private timer: NodeJS.Timeout | null = null;
  private sampling: Promise<void> | null = null;
  private readonly open = new Map<string, { tenantId: string | null; accrued: Accrued }>();
  private openSince: number;
  private disksReadAt: number;
  private readonly now: () => number;

  constructor(private readonly deps: UsageMeterDeps) {
    this.now = deps.now ?? Date.now;
    this.openSince = this.now();
    this.disksReadAt = this.openSince;
  }

  start(): void {
    this.timer = setInterval(() => void this.sample(), this.deps.sampleMs);
    this.timer.unref();
  }

  /** Closed batches no control plane acknowledged yet: a heartbeat says so, and the control plane that takes it collects them. */
  get pendingBatches(): number {
    return this.deps.ledger.pendingCount;
  }

  /** Stops sampling and closes the open period into the ledger. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.sample();
  }

  /** Reads every sandbox and the volumes, and closes the period (one sample at a time). */
  sample(): Promise<void> {
    this.sampling ??= this.sampleAll()
      .catch((err: Error) => this.deps.log.warn(`usage metering: ${err.message}`))
      .finally(() => {
        this.sampling = null;
      });
    return this.sampling;
  }

  /** A pooled sandbox was claimed: it counts for its session from now. */
  async begin(record: SandboxRecord): Promise<void> {
    const usage = await this.deps.cgroup(record.sandboxId).catch(() => null);
    this.deps.ledger.baselines.set(record.sandboxId, {
      sessionId: record.sessionId,
      tenantId: record.tenantId ?? null,
      cpuNanos: usage?.cpuNanos ?? 0,
      at: this.now(),
    });
  }

  /** The sandbox is about to stop: what it used since the last sample is counted now. */
  async end(record: SandboxRecord): Promise<void> {
    await this.read(record).catch(() => undefined);
    this.deps.ledger.baselines.delete(record.sandboxId);
  }

  /** An exchange through the gateway ended. */
  egress(sessionId: string, entry: Pick<EgressAuditEntry, 'bytesSent' | 'bytesReceived'>): void {
    if (!sessionId.startsWith('ses_')) return;
    const { accrued } = this.entryOf(sessionId, null);
    accrued.egressBytesOut += entry.bytesSent;
    accrued.egressBytesIn += entry.bytesReceived;
    accrued.egressRequests += 1;
  }

  private async sampleAll(): Promise<void> {
    const { ledger } = this.deps;
    const records = this.deps.live.all().map((l) => l.record);
    for (const record of records) await this.read(record).catch(() => undefined);
    const running = new Set(records.map((r) => r.sandboxId));
    for (const sandboxId of ledger.baselines.keys()) if (!running.has(sandboxId)) ledger.baselines.delete(sandboxId);
    await this.readDisks();
    await this.close();
  }

  /** Adds what the sandbox used since its baseline, which moves to now. */
  private async read(record: SandboxRecord): Promise<void> {
    const { baselines } = this.deps.ledger;
    const usage = await this.deps.cgroup(record.sandboxId);
    if (!usage) return;
    const now = this.now();
    const tenantId = record.tenantId ?? null;
    const last = baselines.get(record.sandboxId);
    // A reading that finished after a newer one of the same sandbox (a stop's, during a sample) adds nothing.
    if (last && usage.cpuNanos < last.cpuNanos) return;
    baselines.set(record.sandboxId, { sessionId: record.sessionId, tenantId, cpuNanos: usage.cpuNanos, at: now });
    if (isUnclaimed(record)) return;
    // First seen: a new sandbox, whose cgroup counts from its start. Seen pooled: from that reading (its claim's, with `begin`).
    const from = last ?? { cpuNanos: 0, at: Date.parse(record.startedAt) };
    const seconds = Math.max(0, now - from.at) / 1000;
    const { accrued } = this.entryOf(record.sessionId, tenantId);
    accrued.cpuMicros += Math.max(0, usage.cpuNanos - from.cpuNanos) / 1000;
    accrued.memoryKibSeconds += (usage.memoryBytes / 1024) * seconds;
    accrued.sandboxMs += seconds * 1000;
  }

  private async readDisks(): Promise<void> {
    const now = this.now();
    const seconds = (now - this.disksReadAt) / 1000;
    this.disksReadAt = now;
    const bytes = await this.deps.volumeBytes();
    for (const [sessionId, size] of bytes ?? []) {
      if (size > 0) this.entryOf(sessionId, null).accrued.diskKibSeconds += (size / 1024) * seconds;
    }
  }

  /** Closes the open period into a batch, unless the control planes are far behind: then it stays open and goes on adding. */
  private async close(): Promise<void> {
    const { ledger } = this.deps;
    const now = this.now();
    if (this.open.size === 0 || ledger.pendingCount >= maxPendingBatches) {
      await ledger.saveBaselines();
      if (this.open.size === 0) this.openSince = now;
      return;
    }
    // An entry the control planes would refuse would hold up every batch after it: checked here, and left out.
    const entries = [...this.open].flatMap(([sessionId, { tenantId, accrued }]) => {
      const entry = NodeUsageEntrySchema.safeParse({
        sessionId,
        tenantId,
        ...Object.fromEntries(Object.entries(accrued).map(([k, v]) => [k, Math.round(v)])),
      });
      if (!entry.success) this.deps.log.warn(`usage of ${sessionId.slice(0, 80)} left out: ${entry.error.issues[0]?.message}`);
      return entry.success ? [entry.data] : [];
    });
    const period = { start: new Date(this.openSince).toISOString(), end: new Date(now).toISOString(), entries };
    this.open.clear();
    this.openSince = now;
    await ledger.append(period);
  }

  private entryOf(sessionId: string, tenantId: string | null): { tenantId: string | null; accrued: Accrued } {
    let entry = this.open.get(sessionId);
    if (!entry) {
      entry = { tenantId, accrued: nothing() };
      this.open.set(sessionId, entry);
    }
    entry.tenantId ??= tenantId;
    return entry;
  }
}
