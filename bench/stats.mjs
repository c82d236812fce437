/** Percentiles over a list of millisecond samples. */
export function summarize(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  return { n: sorted.length, median: at(50), p90: at(90), p99: at(99), min: sorted[0], max: sorted.at(-1) };
}

export function printTable(rows) {
  const header = ['measurement', 'n', 'median', 'p90', 'p99', 'unit'];
  const lines = rows.map((r) => [r.name, String(r.n ?? ''), fmt(r.median), fmt(r.p90), fmt(r.p99), r.unit]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const l of lines) console.log(line(l));
}

function fmt(v) {
  return v === undefined ? '' : v >= 100 ? v.toFixed(0) : v.toFixed(1);
}

/** Collects named sample series: `record(name, samples, unit)` fills `results` (JSON) and `rows` (table). */
export function recorder() {
  const results = {};
  const rows = [];
  const record = (name, samples, unit = 'ms') => {
    const s = summarize(samples);
    results[name] = { ...s, unit, samples };
    rows.push({ name, ...s, unit });
  };
  return { results, rows, record };
}
