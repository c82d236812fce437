import type { RecordWithTtl } from 'node:dns';

/** A DNS query for one record type, with the TTL of each answer (node:dns/promises `Resolver`, injectable for tests). */
export interface TtlResolver {
  resolve4(host: string, options: { ttl: true }): Promise<RecordWithTtl[]>;
  resolve6(host: string, options: { ttl: true }): Promise<RecordWithTtl[]>;
}

export interface DnsCacheOptions {
  resolver: TtlResolver;
  /**
   * The host's own resolver (getaddrinfo: /etc/hosts, then DNS), asked only when DNS has no answer
   * for the name, so that names the host maps itself keep working. It gives no TTL.
   */
  fallback: (host: string) => Promise<string[]>;
  /** Whether AAAA records are asked for too (only when IPv6 egress is on: they would be refused anyway). */
  ipv6: boolean;
  /** The longest an answer is kept, whatever its TTL (`SPACE_GATEWAY_DNS_MAX_TTL`); 0 keeps nothing. */
  maxTtlSeconds: number;
  /** The longest a caller waits for an answer; past it, the last answer known is used if there is one. */
  timeoutMs: number;
  /** How many names are kept; the least recently used goes first. */
  maxEntries?: number;
  now?: () => number;
}

interface Entry {
  addresses: string[];
  /** Until when the answer is fresh (its TTL, capped). */
  freshUntil: number;
  /** Until when it may still be used when a new lookup fails or stalls. */
  usableUntil: number;
  /** The name does not exist (kept briefly, and never used past its TTL). */
  notFound?: NodeJS.ErrnoException;
}

/** Names the host's fallback answered: they have no TTL, so they are asked again this often. */
const fallbackTtlSeconds = 30;
/** A name that does not exist is not asked again for this long (a loop of failing requests costs one query). */
const negativeTtlSeconds = 5;
/** An answer past its TTL is used for this long when DNS fails or stalls (RFC 8767's serve-stale). */
const staleSeconds = 600;

/** DNS has no record for the name: the host's fallback may still know it. */
const noAnswerCodes = new Set(['ENOTFOUND', 'ENODATA', 'ENONAME', 'ECONNREFUSED', 'ENOTIMP']);

export class DnsTimeoutError extends Error {
  readonly code = 'ETIMEOUT';
}

/**
 * The egress gateway's DNS, one per node: answers are kept for their TTL (capped), a name that is
 * already being looked up is not asked again (a burst of requests to one host costs one query),
 * and no caller waits longer than the timeout: a stalled lookup (the host's resolver takes 5 s to
 * retry a lost UDP packet) falls back to the last answer known, or fails the request quickly.
 */
export class DnsCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inFlight = new Map<string, Promise<string[]>>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(private readonly options: DnsCacheOptions) {
    this.maxEntries = options.maxEntries ?? 4096;
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The addresses of `host`; rejects with the resolver's error (its `code`) or a `DnsTimeoutError`. */
  async lookUp(host: string): Promise<string[]> {
    const name = host.toLowerCase();
    const entry = this.entries.get(name);
    const now = this.now();
    if (entry && entry.freshUntil > now) {
      this.touch(name, entry);
      return answer(name, entry);
    }
    const query = this.inFlight.get(name) ?? this.query(name);
    try {
      return await withTimeout(query, this.options.timeoutMs, name);
    } catch (err) {
      const stale = this.entries.get(name);
      if (stale && stale.usableUntil > this.now() && stale.addresses.length > 0 && !isNoAnswer(err)) return stale.addresses;
      throw err;
    }
  }

  private query(name: string): Promise<string[]> {
    const query = this.resolve(name).finally(() => this.inFlight.delete(name));
    this.inFlight.set(name, query);
    // A caller that timed out is gone; the query still settles and fills the cache for the next one.
    query.catch(() => undefined);
    return query;
  }

  private async resolve(name: string): Promise<string[]> {
    const { resolver, ipv6 } = this.options;
    const families = await Promise.allSettled([resolver.resolve4(name, { ttl: true }), ipv6 ? resolver.resolve6(name, { ttl: true }) : Promise.resolve([])]);
    const records = families.flatMap((f) => (f.status === 'fulfilled' ? f.value : []));
    if (records.length > 0) {
      this.store(
        name,
        records.map((r) => r.address),
        Math.min(...records.map((r) => r.ttl)),
      );
      return records.map((r) => r.address);
    }
    const failure = families.find((f): f is PromiseRejectedResult => f.status === 'rejected')?.reason as NodeJS.ErrnoException | undefined;
    if (failure && !isNoAnswer(failure)) throw failure;
    let addresses: string[];
    try {
      addresses = await this.options.fallback(name);
    } catch (err) {
      if (isNoAnswer(err)) this.store(name, [], negativeTtlSeconds, err as NodeJS.ErrnoException);
      throw err;
    }
    this.store(name, addresses, fallbackTtlSeconds);
    return addresses;
  }

  private store(name: string, addresses: string[], ttlSeconds: number, notFound?: NodeJS.ErrnoException): void {
    const seconds = Math.min(ttlSeconds, this.options.maxTtlSeconds);
    if (seconds <= 0) return;
    const now = this.now();
    const entry: Entry = {
      addresses,
      freshUntil: now + seconds * 1000,
      usableUntil: now + (seconds + (notFound ? 0 : staleSeconds)) * 1000,
      notFound,
    };
    this.touch(name, entry);
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
  }

  /** Moves the entry to the most recently used end. */
  private touch(name: string, entry: Entry): void {
    this.entries.delete(name);
    this.entries.set(name, entry);
  }
}

function answer(name: string, entry: Entry): string[] {
  if (entry.notFound) throw entry.notFound;
  if (entry.addresses.length === 0) throw Object.assign(new Error(`${name} has no addresses`), { code: 'ENODATA' });
  return entry.addresses;
}

function isNoAnswer(err: unknown): boolean {
  return noAnswerCodes.has((err as NodeJS.ErrnoException)?.code ?? '');
}

function withTimeout<T>(promise: Promise<T>, ms: number, name: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DnsTimeoutError(`looking up ${name} took more than ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
