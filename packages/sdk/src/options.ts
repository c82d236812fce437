export interface SpaceOptions {
  /** Base URL of the API. Default: `SPACE_API_URL`, else `http://127.0.0.1:7070`. */
  apiUrl?: string;
  /** API key. Default: `SPACE_API_KEY`. */
  apiKey?: string;
  /** Default timeout of each call, ms. Default 120 000 (sandbox starts and resumes take seconds). */
  timeoutMs?: number;
}

/** Options every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
  /** Overrides the client's default timeout for this call. */
  timeoutMs?: number;
}

export interface ResolvedOptions {
  apiUrl: string;
  apiKey: string;
  timeoutMs: number;
}

/** Resolves options once, reading the environment in this one place. */
export function resolveOptions(options: SpaceOptions, env: Record<string, string | undefined>): ResolvedOptions {
  const apiKey = options.apiKey ?? env.SPACE_API_KEY;
  if (!apiKey) throw new Error('no API key: pass { apiKey } or set SPACE_API_KEY');
  return {
    apiUrl: (options.apiUrl ?? env.SPACE_API_URL ?? 'http://127.0.0.1:7070').replace(/\/+$/, ''),
    apiKey,
    timeoutMs: options.timeoutMs ?? 120_000,
  };
}
