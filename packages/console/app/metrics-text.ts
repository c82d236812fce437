/** Sums of the Prometheus text `/metrics` serves, by series name (labels summed), and single series by their full name. */
export function parseMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(\{[^}]*\})?\s+([-0-9.e+]+)$/.exec(line.trim());
    if (!match) continue;
    const value = Number(match[3]);
    values.set(match[1]!, (values.get(match[1]!) ?? 0) + value);
    if (match[2]) values.set(`${match[1]}${match[2]}`, value);
  }
  return values;
}
