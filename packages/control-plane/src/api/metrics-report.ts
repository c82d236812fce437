import { builtinTemplateNames } from '@space/protocol';
import type { Metrics } from '../metrics/metrics.js';
import type { ControlPlaneRoster } from '../cluster/control-plane-roster.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { Store } from '../store/store.js';
import type { TenantLimits } from '../tenants/tenant-limits.js';

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
    },
  ) {}

  async text(): Promise<string> {
    const byStatus = await this.deps.store.countSessionsByStatus();
    const gauges = Object.fromEntries(['starting', 'running', 'idle', 'stopped', 'failed'].map((s) => [`space_sessions{status="${s}"}`, byStatus[s] ?? 0]));
    const add = (series: string, value: number) => (gauges[series] = (gauges[series] ?? 0) + value);
    // The control planes sharing the store, as this one last saw them: they split the sessions' maintenance.
    gauges.space_control_planes = this.deps.roster.size;
    const nodes = await this.deps.nodes.list();
    for (const status of ['ready', 'draining', 'lost']) gauges[`space_nodes{status="${status}"}`] = nodes.filter((n) => n.status === status).length;
    for (const client of await this.deps.nodes.live()) {
      const health = await client.health().catch(() => null);
      for (const [template, ready] of Object.entries(health?.pool ?? {})) {
        add(`space_pool_ready{template="${templateLabel(template)}"}`, ready);
        add(`space_template_image_ready{template="${templateLabel(template)}"}`, health?.templateImages.includes(template) ? 1 : 0);
      }
      for (const [origin, count] of Object.entries(health?.starts ?? {})) add(`space_node_sandbox_starts{origin="${origin}"}`, count);
      for (const [decision, count] of Object.entries(health?.gatewayRequests ?? {})) add(`space_gateway_requests{decision="${decision}"}`, count);
    }
    return this.deps.metrics.render({ ...gauges, ...this.deps.limits.gauges() });
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
