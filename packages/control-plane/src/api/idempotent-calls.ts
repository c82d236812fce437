import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCode, IDEMPOTENCY_KEY_HEADER, SpaceError, idempotencyKeyPattern } from '@space/protocol';
import { type Handler, type RequestContext, toSpaceError } from '@space/server-kit';
import type { IdempotencyKeyRow, IdempotentOutcome, Store } from '../store/store.js';

export interface IdempotentCallsDeps {
  store: Store;
  /** The tenant a request acts for (asked only of requests that name a key). */
  tenantOf: (req: IncomingMessage) => Promise<string>;
  /** How long an outcome is kept for retries (`SPACE_IDEMPOTENCY_KEEP_SEC`). */
  keepMs: number;
  /** How long a call's claim of its key lasts unless renewed (it is, every third of it, while the call runs): past it (its control plane died) a retry runs the call. */
  claimMs: number;
  now: () => number;
  log: (message: string) => void;
}

/**
 * Outcomes that say the call was refused before it ran (a limit, `429`), or that its fate is not
 * known (the node unavailable, out of time): not kept, so a retry with the key runs it.
 */
const runAgainStatuses = new Set([429, 502, 503, 504]);
/** A larger answer (an exec's output can be megabytes) is not kept: a retry then runs the call again. */
const maxKeptBodyBytes = 1024 * 1024;

/**
 * Calls made with an `Idempotency-Key`: the first one with a key runs, and every retry with that key
 * (from any control plane: the key is claimed in the store) gets its outcome instead of running
 * again, for `keepMs`. A retry while the first is still under way is told to wait
 * (`IDEMPOTENCY_IN_PROGRESS`, `Retry-After`); a key used for another method or path is refused
 * (`IDEMPOTENCY_KEY_REUSED`). A call without the header runs as always.
 */
export class IdempotentCalls {
  constructor(private readonly deps: IdempotentCallsDeps) {}

  /** `handler`, which answers `ctx.res`, run at most once per key of the tenant. */
  wrap(handler: Handler): Handler {
    return (ctx) => this.run(ctx, () => Promise.resolve(handler(ctx)));
  }

  private async run(ctx: RequestContext, handler: () => Promise<void>): Promise<void> {
    const key = keyOf(ctx.req.headers[IDEMPOTENCY_KEY_HEADER]);
    if (key === null) return handler();
    const { store, now } = this.deps;
    const tenantId = await this.deps.tenantOf(ctx.req);
    const operation = `${ctx.req.method} ${ctx.url.pathname}`;
    const held = await store.claimIdempotencyKey({ tenantId, key, operation, expiresAt: now() + this.deps.claimMs }, now());
    if (held) return replay(ctx.res, held, operation);
    const captured = capture(ctx.res);
    const renewal = setInterval(() => void store.renewIdempotencyKey(tenantId, key, now() + this.deps.claimMs).catch(() => undefined), this.deps.claimMs / 3);
    let outcome: IdempotentOutcome | null = null;
    try {
      await handler();
      outcome = captured.outcome();
    } catch (err) {
      const e = toSpaceError(err);
      // As the router will answer it, with the request id it gave the call.
      const requestId = ctx.res.getHeader('x-request-id');
      outcome = ctx.res.headersSent ? null : { status: e.status, body: JSON.stringify(e.toBody(typeof requestId === 'string' ? requestId : undefined)) };
      throw err;
    } finally {
      clearInterval(renewal);
      await this.settle(tenantId, key, outcome).catch((err: Error) => this.deps.log(`idempotency key of ${operation}: ${err.message}`));
      captured.release();
    }
  }

  private async settle(tenantId: string, key: string, outcome: IdempotentOutcome | null): Promise<void> {
    if (outcome && !runAgainStatuses.has(outcome.status))
      await this.deps.store.finishIdempotencyKey(tenantId, key, outcome, this.deps.now() + this.deps.keepMs);
    else await this.deps.store.releaseIdempotencyKey(tenantId, key);
  }
}

function keyOf(header: string | string[] | undefined): string | null {
  if (header === undefined) return null;
  const key = Array.isArray(header) ? header[0]! : header;
  if (!idempotencyKeyPattern.test(key))
    throw new SpaceError(ErrorCode.VALIDATION_FAILED, `the ${IDEMPOTENCY_KEY_HEADER} header must be 1-255 visible ASCII characters (a UUID, say)`);
  return key;
}

function replay(res: ServerResponse, held: IdempotencyKeyRow, operation: string): void {
  if (held.operation !== operation)
    throw new SpaceError(
      ErrorCode.IDEMPOTENCY_KEY_REUSED,
      `this ${IDEMPOTENCY_KEY_HEADER} was used for ${held.operation}, not ${operation}: use a new key for each call`,
    );
  if (!held.outcome)
    throw new SpaceError(ErrorCode.IDEMPOTENCY_IN_PROGRESS, `the first call with this ${IDEMPOTENCY_KEY_HEADER} is still running: retry after it`, {
      retryAfterSec: 1,
    });
  res.writeHead(held.outcome.status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(held.outcome.body),
    'idempotent-replayed': 'true',
  });
  res.end(held.outcome.body);
}

/**
 * Keeps what is written to `res` (up to the bound), to keep as the call's outcome, and holds back
 * the end of the answer until `release()`: the outcome is stored before the caller can see it, so
 * a retry sent the moment the answer arrived (or was lost) finds it.
 */
function capture(res: ServerResponse): { outcome: () => IdempotentOutcome | null; release: () => void } {
  const chunks: Buffer[] = [];
  let bytes = 0;
  let heldEnd: unknown[] | null = null;
  const keep = (chunk: unknown, encoding: unknown): void => {
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
    bytes += buffer.length;
    if (bytes <= maxKeptBodyBytes) chunks.push(buffer);
  };
  const { write, end } = res;
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    keep(chunk, rest[0]);
    return (write as (...args: unknown[]) => boolean).call(res, chunk, ...rest);
  }) as ServerResponse['write'];
  res.end = ((...args: unknown[]) => {
    keep(args[0], args[1]);
    heldEnd = args;
    return res;
  }) as ServerResponse['end'];
  return {
    outcome: () => {
      if (!heldEnd || bytes > maxKeptBodyBytes) return null;
      const body = Buffer.concat(chunks).toString('utf8');
      return isJson(body) ? { status: res.statusCode, body } : null;
    },
    release: () => {
      res.write = write;
      res.end = end;
      if (heldEnd) (end as (...args: unknown[]) => ServerResponse).apply(res, heldEnd);
    },
  };
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
