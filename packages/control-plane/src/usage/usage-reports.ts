import { ErrorCode, SpaceError, type UsageFigures, type UsageQuery, type UsageReport, type UsageRow } from '@space/protocol';
import { type UsageAmounts, type UsageGroupRow, hourOf, noUsage } from '../store/usage-records.js';
import type { Store } from '../store/store.js';
import type { Caller } from '../tenants/auth.js';

const hourMs = 3_600_000;
/** Groups a report holds at most. */
export const maxReportRows = 10_000;
const kibPerGib = 2 ** 20;

const rounded = (value: number): number => Math.round(value * 1e6) / 1e6;

/** Stored amounts in the units a report speaks: seconds, GiB-seconds, GiB-hours. */
export function figuresOf(amounts: UsageAmounts): UsageFigures {
  return {
    cpuSeconds: rounded(amounts.cpuMicros / 1e6),
    memoryGbSeconds: rounded(amounts.memoryKibSeconds / kibPerGib),
    diskGbHours: rounded(amounts.diskKibSeconds / kibPerGib / 3600),
    checkpointGbHours: rounded(amounts.checkpointKibSeconds / kibPerGib / 3600),
    objectStoreGbHours: rounded(amounts.objectStoreKibSeconds / kibPerGib / 3600),
    egressBytesOut: amounts.egressBytesOut,
    egressBytesIn: amounts.egressBytesIn,
    egressRequests: amounts.egressRequests,
    sandboxSeconds: rounded(amounts.sandboxMs / 1000),
    checkpoints: amounts.checkpoints,
  };
}

/** What tenants and sessions used, from the store's hourly records (`GET /v1/usage`, `/metrics`). */
export class UsageReports {
  constructor(
    private readonly store: Pick<Store, 'usageGroups' | 'usageTotals'>,
    private readonly now: () => number,
  ) {}

  /**
   * The caller's usage over whole hours: a tenant's key sees its tenant, a session token its
   * session, the admin key every tenant (or the one it names).
   */
  async report(caller: Caller, query: UsageQuery): Promise<UsageReport> {
    if (!caller.admin && query.tenant !== undefined && query.tenant !== caller.tenantId)
      throw new SpaceError(ErrorCode.FORBIDDEN, "only the admin key reads another tenant's usage");
    if (caller.sessionId && query.sessionId !== undefined && query.sessionId !== caller.sessionId)
      throw new SpaceError(ErrorCode.FORBIDDEN, "a session token reads its own session's usage only");
    const toMs = Math.ceil((query.to ? Date.parse(query.to) : this.now()) / hourMs) * hourMs;
    const fromMs = Math.floor((query.from ? Date.parse(query.from) : toMs - 24 * hourMs) / hourMs) * hourMs;
    if (fromMs >= toMs) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `the period is empty: from (${query.from}) must come before to (${query.to})`);
    const groups = await this.store.usageGroups({
      tenantId: caller.admin ? (query.tenant ?? null) : caller.tenantId,
      sessionId: caller.sessionId ?? query.sessionId ?? null,
      fromHour: hourOf(fromMs),
      toHour: hourOf(toMs),
      groupBy: query.groupBy,
      limit: maxReportRows + 1,
    });
    const kept = groups.slice(0, maxReportRows);
    const sum = noUsage();
    for (const group of kept) for (const key of Object.keys(sum) as (keyof UsageAmounts)[]) sum[key] += group.amounts[key];
    return {
      from: new Date(fromMs).toISOString(),
      to: new Date(toMs).toISOString(),
      groupBy: query.groupBy,
      granularity: 'hour',
      rows: kept.map((group) => rowOf(group, query.groupBy)),
      truncated: groups.length > maxReportRows,
      totals: figuresOf(sum),
    };
  }

  /** Every tenant's usage since metering began, for `/metrics`. */
  async totals(): Promise<Map<string, UsageFigures>> {
    const totals = await this.store.usageTotals();
    return new Map([...totals].map(([tenantId, amounts]) => [tenantId, figuresOf(amounts)]));
  }
}

function rowOf(group: UsageGroupRow, groupBy: UsageQuery['groupBy']): UsageRow {
  const figures = figuresOf(group.amounts);
  if (groupBy === 'session') return { tenantId: group.tenantId, sessionId: group.key === '' ? null : group.key, ...figures };
  if (groupBy === 'day') return { tenantId: group.tenantId, day: group.key, ...figures };
  return { tenantId: group.tenantId, ...figures };
}
