import { type UsageFigures, builtinTemplateNames } from '@space/protocol';
import { SingleFlight } from '@space/server-kit';
import type { Metrics } from '../metrics/metrics.js';
import type { ControlPlaneRoster } from '../cluster/control-plane-roster.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { Store } from '../store/store.js';
import type { TenantLimits } from '../tenants/tenant-limits.js';

/** In a cluster of more nodes than this, the nodes' figures in `/metrics` stand `nodeFiguresMs` before they are collected again. */
const askEveryScrapeUpTo = 10;
const nodeFiguresMs = 10_000;

/**
 * What `/metrics` shows: the counters of this control plane, sessions by status from the store, the
 * nodes by status, and from the nodes that answer their pools and sandbox starts (summed: the
 * cluster's), and the tenants' limits in use, all as aggregates (no tenant is named: the endpoint
 * needs no key). Prometheus text format.
 */
export class MetricsReport {
  constructor(
    private readonly deps: {
      store: Store;
      nodes: NodeDirectory;
      metrics: Metrics;
      limits: Pick<TenantLimits, 'gauges'>;
      roster: Pick<ControlPlaneRoster, 'size'>;
      now?: () => number;
    },
  ) {
    this.now = deps.now ?? Date.now;
  }

  private readonly now: () => number;

  async text(): Promise<string> {
    const byStatus = await this.deps.store.countSessionsByStatus();
    const gauges = Object.fromEntries(['starting', 'running', 'idle', 'stopped', 'failed'].map((s) => [`space_sessions{status="${s}"}`, byStatus[s] ?? 0]));
    // The control planes sharing the store, as this one last saw them: they split the sessions' maintenance.
    gauges.space_control_planes = this.deps.roster.size;
    // This control plane's connections to PostgreSQL, per pool: statements waiting for one wait on the
    // pool (SPACE_DATABASE_CONNECTIONS, SPACE_DATABASE_BACKGROUND_CONNECTIONS), not the server.
    const pools = this.deps.store.connections();
    for (const [pool, use] of Object.entries(pools ?? {})) {
      gauges[`space_store_connections{pool="${pool}",state="busy"}`] = use.busy;
      gauges[`space_store_connections{pool="${pool}",state="idle"}`] = use.idle;
      gauges[`space_store_statements_waiting{pool="${pool}"}`] = use.waiting;
    }
    for (const [status, count] of Object.entries(await this.deps.nodes.countByStatus())) gauges[`space_nodes{status="${status}"}`] = count;
    return this.deps.metrics.render({ ...gauges, ...(await this.nodeGauges()), ...this.deps.limits.gauges() });
  }

  private nodeFigures: { at: number; nodes: number; gauges: Record<string, number> } | null = null;
  private readonly nodeRead = new SingleFlight<Record<string, number>>();

  /**
   * What the nodes report (pools, starts, gateway requests), summed over those that answer: asked
   * of every node at each scrape in a small cluster; in a larger one at most every
   * `nodeFiguresMs`, a scrape in between getting the last figures at once (and starting a new
   * collection when they are older).
   */
  private async nodeGauges(): Promise<Record<string, number>> {
    const figures = this.nodeFigures;
    if (figures && figures.nodes > askEveryScrapeUpTo && this.now() - figures.at < nodeFiguresMs) return figures.gauges;
    const collecting = this.nodeRead.run('nodes', () => this.collectNodeGauges());
    if (figures && figures.nodes > askEveryScrapeUpTo) {
      collecting.catch(() => undefined);
      return figures.gauges;
    }
    return collecting;
  }

  private async collectNodeGauges(): Promise<Record<string, number>> {
    const gauges: Record<string, number> = {};
    const add = (series: string, value: number) => (gauges[series] = (gauges[series] ?? 0) + value);
    const live = await this.deps.nodes.live();
    const healths = await Promise.all(live.map((client) => client.health().catch(() => null)));
    for (const health of healths) {
      for (const [template, ready] of Object.entries(health?.pool ?? {})) {
        add(`space_pool_ready{template="${templateLabel(template)}"}`, ready);
        add(`space_template_image_ready{template="${templateLabel(template)}"}`, health?.templateImages.includes(template) ? 1 : 0);
      }
      for (const [origin, count] of Object.entries(health?.starts ?? {})) add(`space_node_sandbox_starts{origin="${origin}"}`, count);
      for (const [decision, count] of Object.entries(health?.gatewayRequests ?? {})) add(`space_gateway_requests{decision="${decision}"}`, count);
      if (health) add(`space_nodes_storage{status="${health.storage.status}"}`, 1);
    }
    this.nodeFigures = { at: this.now(), nodes: live.length, gauges };
    return gauges;
  }
}

/**
 * A template as a label of the unauthenticated `/metrics`: a built-in by its name, every tenant's
 * own as `custom` (summed), so no tenant's template id is shown to anyone (nor kept in the history).
 */
function templateLabel(template: string): string {
  return builtinTemplateNames.includes(template) ? template : 'custom';
}

/** Every series of a `/metrics` text by its full name (labels included). */
export function parseMetricsText(text: string): Record<string, number> {
  const values: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+(?:\{[^}]*\})?)\s+([-0-9.e+]+)$/.exec(line.trim());
    if (match) values[match[1]!] = Number(match[2]);
  }
  return values;
}

/**
 * The last hour of `/metrics` of this control plane, one sample a minute, for the console's charts
 * (`GET /v1/metrics/history`). Each control plane keeps its own: its counters are its own too.
 */
export class MetricsHistory {
  private readonly kept: { at: string; values: Record<string, number> }[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly report: MetricsReport,
    private readonly everyMs = 60_000,
    private readonly keep = 60,
  ) {}

  start(): void {
    const sample = () =>
      void this.report
        .text()
        .then((text) => {
          this.kept.push({ at: new Date().toISOString(), values: parseMetricsText(text) });
          this.kept.splice(0, Math.max(0, this.kept.length - this.keep));
        })
        .catch(() => undefined);
    sample();
    this.timer = setInterval(sample, this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  samples(): { at: string; values: Record<string, number> }[] {
    return [...this.kept];
  }
}

/** Each tenant's usage as Prometheus counters (`/metrics` with the admin key): a series per figure and tenant. */
export function tenantUsageText(totals: Map<string, UsageFigures>): string {
  const series: [keyof UsageFigures, string][] = [
    ['cpuSeconds', 'space_tenant_cpu_seconds_total'],
    ['memoryGbSeconds', 'space_tenant_memory_gib_seconds_total'],
    ['diskGbHours', 'space_tenant_disk_gib_hours_total'],
    ['checkpointGbHours', 'space_tenant_checkpoint_gib_hours_total'],
    ['objectStoreGbHours', 'space_tenant_object_store_gib_hours_total'],
    ['egressBytesOut', 'space_tenant_egress_sent_bytes_total'],
    ['egressBytesIn', 'space_tenant_egress_received_bytes_total'],
    ['egressRequests', 'space_tenant_egress_requests_total'],
    ['sandboxSeconds', 'space_tenant_sandbox_seconds_total'],
    ['checkpoints', 'space_tenant_checkpoints_total'],
  ];
  const lines = series.flatMap(([figure, name]) => [
    `# TYPE ${name} counter`,
    ...[...totals].map(([tenantId, figures]) => `${name}{tenant="${tenantId}"} ${figures[figure]}`),
  ]);
  return `${lines.join('\n')}\n`;
}
