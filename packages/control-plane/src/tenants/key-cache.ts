import type { ApiKeyRow } from '../store/store.js';

export interface KeyCacheOptions {
  /** How long a key read from the store is taken without reading it again; 0 keeps none. */
  ttlMs: number;
  /** The most keys kept (the oldest go first): a bound on memory, whatever the number of tenants and tokens. */
  maxEntries: number;
  now: () => number;
}

/**
 * Keys this control plane looked up recently, by hash, so that a call reads no key from the store.
 * Only keys found are kept (a key just made through another control plane works at once); a key
 * revoked elsewhere is refused here within `ttlMs`, and one revoked through this process at once.
 */
export class KeyCache {
  private readonly rows = new Map<string, { row: ApiKeyRow; at: number }>();

  constructor(private readonly options: KeyCacheOptions) {}

  get(hash: string): ApiKeyRow | undefined {
    const entry = this.rows.get(hash);
    if (!entry) return undefined;
    if (this.options.now() - entry.at < this.options.ttlMs) return entry.row;
    this.rows.delete(hash);
    return undefined;
  }

  set(hash: string, row: ApiKeyRow): void {
    if (this.options.ttlMs <= 0) return;
    this.rows.delete(hash);
    // A Map iterates in insertion order: the first entry is the oldest.
    if (this.rows.size >= this.options.maxEntries) this.rows.delete(this.rows.keys().next().value!);
    this.rows.set(hash, { row, at: this.options.now() });
  }

  /** Forgets the keys bound to a session (its tokens; of one scope only, when given): they were revoked. */
  forgetSession(sessionId: string, scope?: string): void {
    for (const [hash, { row }] of this.rows) if (row.sessionId === sessionId && (scope === undefined || row.scope === scope)) this.rows.delete(hash);
  }
}
