/** Series of the Prometheus text `/metrics` serves: each by its full name, and each name with its labels summed. */
export function parseMetrics(text: string): Map<string, number> {
  const series: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+(?:\{[^}]*\})?)\s+([-0-9.e+]+)$/.exec(line.trim());
    if (match) series[match[1]!] = Number(match[2]);
  }
  return sumLabels(series);
}

/** Series by full name (`name{labels}`), and each labelled name with its labels summed. */
export function sumLabels(series: Record<string, number>): Map<string, number> {
  const values = new Map<string, number>();
  for (const [full, value] of Object.entries(series)) {
    values.set(full, value);
    const name = full.replace(/\{.*$/, '');
    if (name !== full) values.set(name, (values.get(name) ?? 0) + value);
  }
  return values;
}
