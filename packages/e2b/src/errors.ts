import type { ServerResponse } from 'node:http';
import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorCode, errorStatus, isSpaceError } from '@space/protocol';
import { SpaceClientError, isSpaceApiError } from '@space/sdk';

/** An error as E2B's API answers it: the HTTP status, and `{code, message}` with the same code. */
export class E2bError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** What an error from SPACE (or the adapter) becomes on E2B's API: same status, our code in the message. */
export function toE2bError(err: unknown): E2bError {
  if (err instanceof E2bError) return err;
  if (isSpaceApiError(err)) return new E2bError(err.status || errorStatus[err.code as ErrorCode] || 500, `${err.code}: ${err.message}`);
  if (isSpaceError(err)) return new E2bError(err.status, `${err.code}: ${err.message}`);
  // SPACE's own API did not answer (the adapter's loopback call): unavailable, or too slow.
  if (err instanceof SpaceClientError) return new E2bError(err.code === 'TIMEOUT' ? 504 : 503, `${err.code}: ${err.message}`);
  return new E2bError(500, `INTERNAL: ${(err as Error)?.message ?? 'unexpected error'}`);
}

export function sendE2bError(res: ServerResponse, err: E2bError): void {
  if (res.headersSent) return void res.destroy();
  const body = JSON.stringify({ code: err.status, message: err.message });
  res.writeHead(err.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Connect codes by HTTP status, for errors SPACE answers a data-plane call with (as envd's would read). */
const connectCodes = new Map<number, Code>([
  [400, Code.InvalidArgument],
  [401, Code.Unauthenticated],
  [403, Code.PermissionDenied],
  [404, Code.NotFound],
  [408, Code.DeadlineExceeded],
  [409, Code.FailedPrecondition],
  [413, Code.ResourceExhausted],
  [429, Code.ResourceExhausted],
  [502, Code.Unavailable],
  [503, Code.Unavailable],
  [504, Code.DeadlineExceeded],
]);

/** The Connect error an E2B client gets for a SPACE error: a file that exists is AlreadyExists, as envd says it. */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const code = isSpaceApiError(err) || isSpaceError(err) ? err.code : null;
  if (code === ErrorCode.FILE_EXISTS) return new ConnectError(`${code}: ${(err as Error).message}`, Code.AlreadyExists);
  const e = toE2bError(err);
  return new ConnectError(e.message, connectCodes.get(e.status) ?? Code.Internal);
}
