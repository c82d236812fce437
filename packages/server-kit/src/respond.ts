import type { ServerResponse } from 'node:http';
import { ErrorCode, SpaceError, isSpaceError } from '@space/protocol';

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Turns any thrown value into a SpaceError: the one place unknown errors become typed ones. */
export function toSpaceError(err: unknown): SpaceError {
  if (isSpaceError(err)) return err;
  if (err instanceof SyntaxError) return new SpaceError(ErrorCode.INVALID_JSON, `malformed JSON: ${err.message}`);
  const message = err instanceof Error ? err.message : String(err);
  return new SpaceError(ErrorCode.INTERNAL, `internal error: ${message}`);
}

/** The Retry-After value of an error that says when to come back (`details.retryAfterSec`). */
export function retryAfterOf(e: SpaceError): string | undefined {
  const seconds = e.details?.retryAfterSec;
  return typeof seconds === 'number' ? String(seconds) : undefined;
}

export function sendError(res: ServerResponse, err: unknown, requestId?: string): void {
  const spaceError = toSpaceError(err);
  if (res.headersSent) {
    // Too late for a status line: cut the response so the client sees a failure, not a short body.
    res.destroy(spaceError);
    return;
  }
  const retryAfter = retryAfterOf(spaceError);
  if (retryAfter) res.setHeader('retry-after', retryAfter);
  sendJson(res, spaceError.status, spaceError.toBody(requestId));
}
