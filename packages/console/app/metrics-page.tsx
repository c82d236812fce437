import { useEffect, useState } from 'preact/hooks';
import { parseMetrics, sumLabels } from './metrics-text.js';

/** What the page charts: a counter's increase per sample, or a gauge's value. */
const charts: { title: string; series: string; counter: boolean }[] = [
  { title: 'Sandbox starts', series: 'space_sandbox_starts_total', counter: true },
  { title: 'Resumes', series: 'space_resumes_total', counter: true },
  { title: 'Checkpoints', series: 'space_checkpoints_total', counter: true },
  { title: 'Checkpoint pauses (s)', series: 'space_checkpoint_pause_seconds_total', counter: true },
  { title: 'Gateway requests', series: 'space_gateway_requests', counter: true },
  { title: 'Sandbox deaths', series: 'space_sandbox_deaths_total', counter: true },
  { title: 'Sessions running', series: 'space_sessions{status="running"}', counter: false },
  { title: 'Warm pool, ready', series: 'space_pool_ready', counter: false },
];
const everyMs = 5000;
/** An hour of samples, kept in the tab. */
const keep = 720;

function Chart({ title, points }: { title: string; points: number[] }) {
  const max = Math.max(1, ...points);
  const width = 360;
  const height = 90;
  const step = width / Math.max(1, keep - 1);
  const d = points
    .map((v, i) => `${i === 0 ? 'M' : 'L'} ${(width - (points.length - 1 - i) * step).toFixed(1)} ${(height - (v / max) * (height - 10)).toFixed(1)}`)
    .join(' ');
  return (
    <figure>
      <figcaption>
        {title}: {points.at(-1) ?? 0} (max {max})
      </figcaption>
      <svg class="chart" width={width} height={height} role="img" aria-label={title}>
        <rect class="plot" width={width} height={height} />
        <path class="line" d={d} />
      </svg>
    </figure>
  );
}

/**
 * Charts of the platform's `/metrics` over the last hour: the control plane's minute samples
 * (`GET /v1/metrics/history`), then a sample every 5 s while the page is open.
 */
export function MetricsPage() {
  const [samples, setSamples] = useState<Map<string, number>[]>([]);
  useEffect(() => {
    void fetch('/v1/metrics/history')
      .then((res) => res.json() as Promise<{ samples: { values: Record<string, number> }[] }>)
      .then(({ samples: history }) => setSamples((live) => [...history.map((s) => sumLabels(s.values)), ...live].slice(-keep - 1)))
      .catch(() => undefined);
    const sample = async () => {
      const values = parseMetrics(await (await fetch('/metrics')).text());
      setSamples((s) => [...s, values].slice(-keep - 1));
    };
    void sample();
    const timer = setInterval(() => void sample().catch(() => undefined), everyMs);
    return () => clearInterval(timer);
  }, []);
  return (
    <section aria-labelledby="metrics-title">
      <h1 id="metrics-title">Metrics</h1>
      <p>The last hour of /metrics (a sample a minute), then every 5 s while this page is open; counters as their increase per sample.</p>
      <div style="display:flex;flex-wrap:wrap;gap:1rem">
        {charts.map(({ title, series, counter }) => {
          const values = samples.map((s) => s.get(series) ?? 0);
          const points = counter ? values.slice(1).map((v, i) => Math.max(0, v - values[i]!)) : values;
          return <Chart key={series} title={title} points={points} />;
        })}
      </div>
    </section>
  );
}
