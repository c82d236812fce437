/**
 * A token bucket per key: `ratePerSec` tokens a second up to `burst`, times `share` (this process's
 * part of a rate several share). Each take spends one; an empty bucket says how long until the
 * next token. Keys are tenants (authenticated callers only), so the map grows with tenants, not
 * with requests.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly fullRatePerSec: number,
    private readonly fullBurst: number,
    private readonly now: () => number = Date.now,
    private readonly share: () => number = () => 1,
  ) {}

  private get ratePerSec(): number {
    return this.fullRatePerSec * this.share();
  }

  private get burst(): number {
    return Math.max(1, this.fullBurst * this.share());
  }

  /** Spends a token of `key`: 0 when there was one, else the ms until there is one (nothing spent). */
  take(key: string): number {
    const bucket = this.refilled(key);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) / this.ratePerSec) * 1000);
  }

  /** Tokens of `key` spent and not yet refilled. */
  used(key: string): number {
    return Math.round(this.burst - this.refilled(key).tokens);
  }

  private refilled(key: string): { tokens: number; at: number } {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.ratePerSec);
    bucket.at = now;
    this.buckets.set(key, bucket);
    return bucket;
  }
}
