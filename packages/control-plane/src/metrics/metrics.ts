/** Resume latency buckets, seconds. */
const resumeBuckets = [0.25, 0.5, 1, 2, 5, 10, 30];

/** Every counter, listed in /metrics from the start (at 0). */
const counterNames = [
  'sandbox_starts',
  'sandbox_deaths',
  'resumes',
  'checkpoints',
  'checkpoint_failures',
  'checkpoint_pause_seconds',
  'full_checkpoint_fallbacks',
  'idle_stops',
  'checkpoints_skipped_unchanged',
  'checkpoints_skipped_quiet',
  'sessions_reconciled',
  'requests_refused',
  'creates_queued',
  'checkpoints_shipped',
  'checkpoint_shipped_bytes',
  'checkpoint_ship_seconds',
  'checkpoint_ship_failures',
  'sessions_moved',
  'pauses',
  'session_timeouts',
  'maintenance_passes',
  'maintenance_visits',
] as const;
export type CounterName = (typeof counterNames)[number];

/**
 * Counters and the resume-latency histogram behind `GET /metrics` (Prometheus text format).
 * Per process: each control-plane replica reports what it did.
 */
export class Metrics {
  private readonly counters = new Map<string, number>();
  private readonly bucketCounts = resumeBuckets.map(() => 0);
  private resumeCount = 0;
  private resumeSum = 0;
  /** This control plane's last maintenance pass: how long it took and how many sessions it visited (its share of those anything may be due for). */
  private lastPass = { seconds: 0, sessions: 0 };

  inc(name: CounterName, labels: Record<string, string> = {}, by = 1): void {
    const key = `space_${name}_total${formatLabels(labels)}`;
    this.counters.set(key, (this.counters.get(key) ?? 0) + by);
  }

  observeResume(seconds: number): void {
    this.resumeCount++;
    this.resumeSum += seconds;
    resumeBuckets.forEach((bound, i) => {
      if (seconds <= bound) this.bucketCounts[i]!++;
    });
  }

  observeMaintenancePass(seconds: number, sessions: number): void {
    this.inc('maintenance_passes');
    this.inc('maintenance_visits', {}, sessions);
    this.lastPass = { seconds, sessions };
  }

  render(gauges: Record<string, number>): string {
    const lines: string[] = [];
    const names = new Set([...this.counters.keys()].map((k) => k.split('{')[0]!));
    for (const name of counterNames) names.add(`space_${name}_total`);
    for (const name of [...names].sort()) {
      lines.push(`# TYPE ${name} counter`);
      const series = [...this.counters.entries()].filter(([k]) => k.split('{')[0] === name);
      if (series.length === 0) lines.push(`${name} 0`);
      for (const [key, value] of series) lines.push(`${key} ${value}`);
    }
    lines.push('# TYPE space_resume_seconds histogram');
    resumeBuckets.forEach((bound, i) => lines.push(`space_resume_seconds_bucket{le="${bound}"} ${this.bucketCounts[i]}`));
    lines.push(`space_resume_seconds_bucket{le="+Inf"} ${this.resumeCount}`);
    lines.push(`space_resume_seconds_sum ${this.resumeSum.toFixed(3)}`);
    lines.push(`space_resume_seconds_count ${this.resumeCount}`);
    const all = {
      ...gauges,
      space_maintenance_last_pass_seconds: Number(this.lastPass.seconds.toFixed(4)),
      space_maintenance_last_pass_sessions: this.lastPass.sessions,
    };
    for (const [key, value] of Object.entries(all)) {
      const name = key.split('{')[0];
      if (!lines.includes(`# TYPE ${name} gauge`)) lines.push(`# TYPE ${name} gauge`);
      lines.push(`${key} ${value}`);
    }
    return `${lines.join('\n')}\n`;
  }
}

function formatLabels(labels: Record<string, string>): string {
  const entries = Object.entries(labels);
  return entries.length ? `{${entries.map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`).join(',')}}` : '';
}
