export interface SpaceOptions {
  /**
   * Base URL of the API, or the URLs of several control planes: a call that cannot connect to one
   * goes to the next, which is then used until it fails in turn. Default: `SPACE_API_URL`
   * (comma-separated for several), else `http://127.0.0.1:7070`.
   */
  apiUrl?: string | string[];
  /** API key. Default: `SPACE_API_KEY`. */
  apiKey?: string;
  /** Default timeout of each call, ms. Default 120 000 (sandbox starts and resumes take seconds). */
  timeoutMs?: number;
  /**
   * A `429` (a per-tenant limit refused the call before doing anything) is waited out by its
   * `Retry-After` and sent again: at most `attempts` times (default 20), each wait at most
   * `maxWaitMs` (default 10 000). `false`: never (the 429 is thrown at once).
   */
  retry?: { attempts?: number; maxWaitMs?: number } | false;
}

/** Options every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
  /** Overrides the client's default timeout for this call. */
  timeoutMs?: number;
  /**
   * The call's idempotency key, for a call that changes something (a fresh UUID by default, the
   * same on each retry the SDK makes): pass your own to retry it yourself, later or from another
   * process, and get the first outcome instead of running it again.
   */
  idempotencyKey?: string;
}

export interface ResolvedOptions {
  apiUrls: string[];
  apiKey: string;
  timeoutMs: number;
  retry: { attempts: number; maxWaitMs: number };
}

/** Resolves options once, reading the environment in this one place. */
export function resolveOptions(options: SpaceOptions, env: Record<string, string | undefined>): ResolvedOptions {
  const apiKey = options.apiKey ?? env.SPACE_API_KEY;
  if (!apiKey) throw new Error('no API key: pass { apiKey } or set SPACE_API_KEY');
  return {
    apiUrls: urlList(options.apiUrl ?? env.SPACE_API_URL ?? 'http://127.0.0.1:7070'),
    apiKey,
    timeoutMs: options.timeoutMs ?? 120_000,
    retry: options.retry === false ? { attempts: 0, maxWaitMs: 0 } : { attempts: options.retry?.attempts ?? 20, maxWaitMs: options.retry?.maxWaitMs ?? 10_000 },
  };
}

function urlList(value: string | string[]): string[] {
  const urls = (Array.isArray(value) ? value : value.split(',')).map((u) => u.trim().replace(/\/+$/, '')).filter(Boolean);
  if (urls.length === 0) throw new Error('no API URL: pass { apiUrl } or set SPACE_API_URL');
  return urls;
}
