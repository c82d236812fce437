import type { Command } from 'commander';
import type { UsageFiguresData, UsageGroupBy, UsageReportData, UsageRowData } from '@space/sdk';
import { cliClient, output } from '../client.js';

const columns: [keyof UsageFiguresData, string][] = [
  ['cpuSeconds', 'cpu s'],
  ['memoryGbSeconds', 'mem GiB·s'],
  ['diskGbHours', 'disk GiB·h'],
  ['checkpointGbHours', 'ckpt GiB·h'],
  ['objectStoreGbHours', 'objects GiB·h'],
  ['egressBytesOut', 'sent B'],
  ['egressBytesIn', 'received B'],
  ['egressRequests', 'requests'],
  ['sandboxSeconds', 'sandbox s'],
  ['checkpoints', 'checkpoints'],
];

const figure = (value: number): string => (Number.isInteger(value) ? String(value) : value.toFixed(3));

function groupOf(row: UsageRowData, groupBy: UsageGroupBy): string {
  if (groupBy === 'day') return `${row.day} ${row.tenantId}`;
  if (groupBy === 'session') return row.sessionId ?? `${row.tenantId} checkpoints`;
  return row.tenantId;
}

function table(report: UsageReportData): string {
  const lines = [
    ['', ...columns.map(([, title]) => title)],
    ...report.rows.map((row) => [groupOf(row, report.groupBy), ...columns.map(([key]) => figure(row[key]))]),
    ['total', ...columns.map(([key]) => figure(report.totals[key]))],
  ];
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((cells) => cells[i]!.length)));
  return [
    `usage from ${report.from} to ${report.to} (whole UTC hours), by ${report.groupBy}${report.truncated ? ' (truncated: narrow the period)' : ''}`,
    ...lines.map((cells) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ')),
  ].join('\n');
}

/** usage: what the tenant used (CPU, memory, disk, checkpoints, egress, sandbox time) over a period. */
export function registerUsageCommand(program: Command): void {
  program
    .command('usage')
    .description('what was used over a period (whole UTC hours), by tenant, session or day: the calling tenant, or with the admin key every tenant')
    .option('--from <time>', 'start (ISO 8601; default 24 hours before --to)')
    .option('--to <time>', 'end (ISO 8601; default now)')
    .option('--group-by <group>', 'tenant, session or day', 'day')
    .option('--session <id>', "one session's usage")
    .option('--tenant <id>', "another tenant's usage (admin key)")
    .option('--json', 'print JSON')
    .action(async (opts: { from?: string; to?: string; groupBy: UsageGroupBy; session?: string; tenant?: string; json?: boolean }) => {
      const report = await cliClient(process.env).usage({
        from: opts.from,
        to: opts.to,
        groupBy: opts.groupBy,
        sessionId: opts.session,
        tenant: opts.tenant,
      });
      output(Boolean(opts.json), report, () => table(report));
    });
}
