import type { IncomingMessage } from 'node:http';
import { ErrorCode, SpaceError } from '@space/protocol';
import type { Authenticator } from './auth.js';
import { InFlight } from './in-flight.js';
import type { Metrics } from './metrics.js';

export interface TenantLimitOptions {
  /** Calls of one tenant under way at once in this control-plane process (`SPACE_TENANT_MAX_REQUESTS`). */
  maxRequests: number;
  /** Open streams (exec, PTY, attach, watch) of one tenant in this process (`SPACE_TENANT_MAX_STREAMS`). */
  maxStreams: number;
}

export const defaultTenantLimits: TenantLimitOptions = { maxRequests: 256, maxStreams: 64 };

/**
 * Bounds what one tenant can hold open at once, so one tenant's flood of slow calls or streams
 * cannot take every connection the platform has: past a bound, 429 TOO_MANY_REQUESTS with
 * Retry-After. Counted per process; requests without a valid key are not counted (they are refused
 * by the route's own authentication).
 */
export class TenantLimits {
  private readonly open = new InFlight();

  constructor(
    private readonly auth: Authenticator,
    private readonly metrics: Metrics,
    private readonly options: TenantLimitOptions = defaultTenantLimits,
  ) {}

  /** The router's admission hook. */
  readonly admit = (req: IncomingMessage, kind: 'request' | 'stream'): (() => void) => {
    let tenantId: string;
    try {
      tenantId = this.auth.authenticate(req).tenantId;
    } catch {
      return () => undefined;
    }
    const key = `${kind}:${tenantId}`;
    const limit = kind === 'request' ? this.options.maxRequests : this.options.maxStreams;
    const current = this.open.count(key);
    if (current >= limit) {
      this.metrics.inc('requests_refused', { reason: kind === 'request' ? 'tenant_requests' : 'tenant_streams' });
      throw new SpaceError(
        ErrorCode.TOO_MANY_REQUESTS,
        `this tenant already has ${current} ${kind === 'request' ? 'calls' : 'streams'} open (the limit); retry when some finish`,
        { retryAfterSec: 1 },
      );
    }
    return this.open.begin(key);
  };
}
