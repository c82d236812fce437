import { useEffect, useState } from 'preact/hooks';
import type { UsageGroupBy, UsageReport, UsageRow } from '@space/protocol';
import { json } from './api.js';
import { EmptyState, ErrorAlert, TableHead } from './ui.js';

const periods = [
  ['24 hours', 24],
  ['7 days', 24 * 7],
  ['30 days', 24 * 30],
] as const;

const figures: [keyof UsageRow & keyof UsageReport['totals'], string][] = [
  ['cpuSeconds', 'CPU s'],
  ['memoryGbSeconds', 'Memory GiB·s'],
  ['diskGbHours', 'Disk GiB·h'],
  ['checkpointGbHours', 'Checkpoints GiB·h'],
  ['objectStoreGbHours', 'Object store GiB·h'],
  ['egressBytesOut', 'Sent B'],
  ['egressBytesIn', 'Received B'],
  ['egressRequests', 'Requests'],
  ['sandboxSeconds', 'Sandbox s'],
  ['checkpoints', 'Checkpoints'],
];

const shown = (value: number) => (Number.isInteger(value) ? value.toLocaleString() : value.toFixed(3));

function groupOf(row: UsageRow, groupBy: UsageGroupBy): string {
  if (groupBy === 'day') return row.day ?? '';
  if (groupBy === 'session') return row.sessionId ?? 'checkpoint storage';
  return row.tenantId;
}

/** What the tenant used over a period (`GET /v1/usage`), by day, session or tenant, with its totals. */
export function UsagePage() {
  const [hours, setHours] = useState<number>(24);
  const [groupBy, setGroupBy] = useState<UsageGroupBy>('day');
  const [report, setReport] = useState<UsageReport | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const from = new Date(Date.now() - hours * 3_600_000).toISOString();
    json<UsageReport>('GET', `/v1/usage?${new URLSearchParams({ from, groupBy })}`)
      .then((r) => (setReport(r), setError(null)))
      .catch((e: Error) => setError(e.message));
  }, [hours, groupBy]);
  return (
    <section aria-labelledby="usage-title">
      <h1 id="usage-title">Usage</h1>
      <p>
        Measured by the nodes (each sandbox's CPU and memory, its volume, its traffic through the gateway) and the store (checkpoints), recorded per session and
        hour. GiB are 2<sup>30</sup> bytes.
      </p>
      <form class="inline" onSubmit={(e) => e.preventDefault()}>
        <label for="usage-period">Period</label>
        <select id="usage-period" value={hours} onChange={(e) => setHours(Number((e.target as HTMLSelectElement).value))}>
          {periods.map(([name, h]) => (
            <option key={h} value={h}>
              {name}
            </option>
          ))}
        </select>
        <label for="usage-group">By</label>
        <select id="usage-group" value={groupBy} onChange={(e) => setGroupBy((e.target as HTMLSelectElement).value as UsageGroupBy)}>
          <option value="day">day</option>
          <option value="session">session</option>
          <option value="tenant">tenant</option>
        </select>
      </form>
      <ErrorAlert error={error} />
      {report && report.rows.length === 0 ? (
        <EmptyState title="No usage in this period.">Sessions that ran are counted within about a minute.</EmptyState>
      ) : report ? (
        <table>
          <TableHead columns={[groupBy === 'day' ? 'Day' : groupBy === 'session' ? 'Session' : 'Tenant', ...figures.map(([, title]) => title)]} />
          <tbody>
            {report.rows.map((row) => (
              <tr key={`${row.tenantId} ${groupOf(row, report.groupBy)}`}>
                <td>{groupOf(row, report.groupBy)}</td>
                {figures.map(([key]) => (
                  <td key={key}>{shown(row[key] as number)}</td>
                ))}
              </tr>
            ))}
            <tr>
              <th scope="row">Total{report.truncated ? ' (of the first 10,000)' : ''}</th>
              {figures.map(([key]) => (
                <td key={key}>{shown(report.totals[key])}</td>
              ))}
            </tr>
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
