/**
 * How long a tenant's usage as read (its count of sessions or its checkpoint storage, as the
 * database keeps them in `tenant_usage`) stands while the tenant is far below its maximum; other control planes'
 * additions are seen at the next read.
 */
const usageReadMs = 1000;

/**
 * One kind of usage per tenant as this control plane last read it, with what it added since: a check
 * far below the maximum needs no read of the store.
 */
export class RecentUsage {
  private readonly reads = new Map<string, { used: number; at: number }>();

  constructor(private readonly now: () => number) {}

  /**
   * Whether the tenant's usage read within `usageReadMs`, with `growth` more, stays within `ceiling`:
   * then `growth` is counted on and the caller need not read the store (a statement saved per creation).
   */
  stands(tenantId: string, growth: number, ceiling: number): boolean {
    const known = this.reads.get(tenantId);
    if (!known || this.now() - known.at >= usageReadMs || known.used + growth > ceiling) return false;
    known.used += growth;
    return true;
  }

  /** The tenant's usage as just read (with what its caller adds). Reads older than `usageReadMs` are of no use, so with many tenants they go all at once. */
  record(tenantId: string, used: number): void {
    if (this.reads.size >= 10_000) this.reads.clear();
    this.reads.set(tenantId, { used, at: this.now() });
  }
}
