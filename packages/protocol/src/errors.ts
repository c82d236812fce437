/**
 * The closed set of error codes every SPACE layer speaks, and their one HTTP mapping.
 * A new code without a status fails to compile.
 */
export const ErrorCode = {
  UNAUTHORIZED: 'UNAUTHORIZED',
  FORBIDDEN: 'FORBIDDEN',
  ROUTE_NOT_FOUND: 'ROUTE_NOT_FOUND',
  METHOD_NOT_ALLOWED: 'METHOD_NOT_ALLOWED',
  INVALID_JSON: 'INVALID_JSON',
  VALIDATION_FAILED: 'VALIDATION_FAILED',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  URI_TOO_LONG: 'URI_TOO_LONG',
  HEADERS_TOO_LARGE: 'HEADERS_TOO_LARGE',
  REQUEST_TIMEOUT: 'REQUEST_TIMEOUT',
  REQUEST_ABORTED: 'REQUEST_ABORTED',
  DEADLINE_EXCEEDED: 'DEADLINE_EXCEEDED',
  TOO_MANY_REQUESTS: 'TOO_MANY_REQUESTS',
  QUOTA_EXCEEDED: 'QUOTA_EXCEEDED',
  SESSION_BUSY: 'SESSION_BUSY',
  IDEMPOTENCY_KEY_REUSED: 'IDEMPOTENCY_KEY_REUSED',
  IDEMPOTENCY_IN_PROGRESS: 'IDEMPOTENCY_IN_PROGRESS',
  UNKNOWN_TEMPLATE: 'UNKNOWN_TEMPLATE',
  TEMPLATE_IN_USE: 'TEMPLATE_IN_USE',
  TEMPLATE_NOT_FOUND: 'TEMPLATE_NOT_FOUND',
  SESSION_NOT_FOUND: 'SESSION_NOT_FOUND',
  TENANT_NOT_FOUND: 'TENANT_NOT_FOUND',
  SANDBOX_NOT_FOUND: 'SANDBOX_NOT_FOUND',
  PROCESS_NOT_FOUND: 'PROCESS_NOT_FOUND',
  CHECKPOINT_NOT_FOUND: 'CHECKPOINT_NOT_FOUND',
  SECRET_NOT_FOUND: 'SECRET_NOT_FOUND',
  CHECKPOINT_NOT_IN_LINEAGE: 'CHECKPOINT_NOT_IN_LINEAGE',
  FULL_CHECKPOINT_REFUSED: 'FULL_CHECKPOINT_REFUSED',
  FULL_CHECKPOINT_FAILED: 'FULL_CHECKPOINT_FAILED',
  INVALID_PATH: 'INVALID_PATH',
  FILE_NOT_FOUND: 'FILE_NOT_FOUND',
  FILE_EXISTS: 'FILE_EXISTS',
  IS_A_DIRECTORY: 'IS_A_DIRECTORY',
  NOT_A_DIRECTORY: 'NOT_A_DIRECTORY',
  DIRECTORY_NOT_EMPTY: 'DIRECTORY_NOT_EMPTY',
  RESOURCE_BUSY: 'RESOURCE_BUSY',
  NO_SPACE: 'NO_SPACE',
  RESOURCE_EXHAUSTED: 'RESOURCE_EXHAUSTED',
  EXEC_FAILED: 'EXEC_FAILED',
  SANDBOX_START_FAILED: 'SANDBOX_START_FAILED',
  SANDBOX_UNAVAILABLE: 'SANDBOX_UNAVAILABLE',
  SANDBOX_DIED: 'SANDBOX_DIED',
  SANDBOX_STOPPED: 'SANDBOX_STOPPED',
  PLACEMENT_STALE: 'PLACEMENT_STALE',
  SESSION_NOT_RUNNING: 'SESSION_NOT_RUNNING',
  PORT_NOT_LISTENING: 'PORT_NOT_LISTENING',
  DAEMON_PROTOCOL_ERROR: 'DAEMON_PROTOCOL_ERROR',
  NODE_UNAVAILABLE: 'NODE_UNAVAILABLE',
  NODE_NOT_FOUND: 'NODE_NOT_FOUND',
  STORE_UNAVAILABLE: 'STORE_UNAVAILABLE',
  OBJECT_NOT_FOUND: 'OBJECT_NOT_FOUND',
  OBJECT_CORRUPT: 'OBJECT_CORRUPT',
  OBJECT_STORE_UNAVAILABLE: 'OBJECT_STORE_UNAVAILABLE',
  TEMPLATE_BUILD_FAILED: 'TEMPLATE_BUILD_FAILED',
  VOLUME_NOT_FOUND: 'VOLUME_NOT_FOUND',
  VOLUME_EXISTS: 'VOLUME_EXISTS',
  VOLUME_BUSY: 'VOLUME_BUSY',
  VOLUME_IN_USE: 'VOLUME_IN_USE',
  VOLUME_UNAVAILABLE: 'VOLUME_UNAVAILABLE',
  CONTEXT_NOT_FOUND: 'CONTEXT_NOT_FOUND',
  CODE_INTERPRETER_UNAVAILABLE: 'CODE_INTERPRETER_UNAVAILABLE',
  NO_DESKTOP: 'NO_DESKTOP',
  DESKTOP_UNAVAILABLE: 'DESKTOP_UNAVAILABLE',
  INTERNAL: 'INTERNAL',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export const errorStatus: Record<ErrorCode, number> = {
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  ROUTE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  INVALID_JSON: 400,
  VALIDATION_FAILED: 400,
  PAYLOAD_TOO_LARGE: 413,
  URI_TOO_LONG: 414,
  HEADERS_TOO_LARGE: 431,
  REQUEST_TIMEOUT: 408,
  REQUEST_ABORTED: 400,
  DEADLINE_EXCEEDED: 504,
  TOO_MANY_REQUESTS: 429,
  QUOTA_EXCEEDED: 403,
  SESSION_BUSY: 409,
  /** The key was used for another operation (method and path) of this tenant. */
  IDEMPOTENCY_KEY_REUSED: 422,
  /** The first call with this key is still running: retry after it (`Retry-After`). */
  IDEMPOTENCY_IN_PROGRESS: 409,
  UNKNOWN_TEMPLATE: 400,
  TEMPLATE_IN_USE: 409,
  TEMPLATE_NOT_FOUND: 404,
  SESSION_NOT_FOUND: 404,
  TENANT_NOT_FOUND: 404,
  SANDBOX_NOT_FOUND: 404,
  PROCESS_NOT_FOUND: 404,
  CHECKPOINT_NOT_FOUND: 404,
  SECRET_NOT_FOUND: 404,
  CHECKPOINT_NOT_IN_LINEAGE: 400,
  FULL_CHECKPOINT_REFUSED: 409,
  FULL_CHECKPOINT_FAILED: 500,
  INVALID_PATH: 400,
  FILE_NOT_FOUND: 404,
  FILE_EXISTS: 409,
  IS_A_DIRECTORY: 400,
  NOT_A_DIRECTORY: 400,
  DIRECTORY_NOT_EMPTY: 409,
  RESOURCE_BUSY: 409,
  NO_SPACE: 507,
  RESOURCE_EXHAUSTED: 503,
  EXEC_FAILED: 400,
  SANDBOX_START_FAILED: 503,
  SANDBOX_UNAVAILABLE: 503,
  SANDBOX_DIED: 503,
  SANDBOX_STOPPED: 409,
  PLACEMENT_STALE: 409,
  SESSION_NOT_RUNNING: 409,
  PORT_NOT_LISTENING: 502,
  DAEMON_PROTOCOL_ERROR: 502,
  NODE_UNAVAILABLE: 503,
  NODE_NOT_FOUND: 404,
  STORE_UNAVAILABLE: 503,
  OBJECT_NOT_FOUND: 404,
  OBJECT_CORRUPT: 502,
  OBJECT_STORE_UNAVAILABLE: 503,
  TEMPLATE_BUILD_FAILED: 500,
  VOLUME_NOT_FOUND: 404,
  VOLUME_EXISTS: 409,
  /** Mounted read-write by another session (one writer at a time). */
  VOLUME_BUSY: 409,
  /** Mounted by sessions: not deleted. */
  VOLUME_IN_USE: 409,
  /** Its node cannot serve it now (lost), or volumes asked together live on different nodes. */
  VOLUME_UNAVAILABLE: 409,
  CONTEXT_NOT_FOUND: 404,
  CODE_INTERPRETER_UNAVAILABLE: 409,
  /** The session's template has no desktop: create it with the `desktop` template. */
  NO_DESKTOP: 409,
  /** The desktop's display or server did not start, or a tool on it failed. */
  DESKTOP_UNAVAILABLE: 503,
  INTERNAL: 500,
};

const codes = new Set<string>(Object.values(ErrorCode));

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && codes.has(value);
}

/** An error that crosses the wire as `{error: {code, message}}`. */
export class SpaceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;

  /** Machine-readable facts about the error, e.g. the fs checkpoint taken when a full one was refused. */
  readonly details: ErrorDetails | undefined;

  constructor(code: ErrorCode, message: string, details?: ErrorDetails) {
    super(message);
    this.name = 'SpaceError';
    this.code = code;
    this.status = errorStatus[code];
    this.details = details;
  }

  /** The wire form; `requestId` names the request in the server's log (every error carries it). */
  toBody(requestId?: string): ErrorBody {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}), ...(requestId ? { requestId } : {}) } };
  }
}

export type ErrorDetails = Record<string, string | number | boolean>;

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: ErrorDetails; requestId?: string };
}

/** Details from the wire: at most 16 primitive fields with short keys and values, anything else dropped. */
function parseDetails(value: unknown): ErrorDetails | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const details: ErrorDetails = {};
  for (const [key, v] of Object.entries(value).slice(0, 16)) {
    if (key.length > 64) continue;
    if (typeof v === 'number' || typeof v === 'boolean') details[key] = v;
    else if (typeof v === 'string') details[key] = v.slice(0, 256);
  }
  return Object.keys(details).length ? details : undefined;
}

/** Duck-typed check: `instanceof` is unreliable across package copies. */
export function isSpaceError(value: unknown): value is SpaceError {
  return typeof value === 'object' && value !== null && (value as { name?: unknown }).name === 'SpaceError' && isErrorCode((value as { code?: unknown }).code);
}

/** Rebuilds a SpaceError from a parsed wire body; anything unrecognised becomes `fallback`. */
export function errorFromBody(body: unknown, fallback: ErrorCode, fallbackMessage: string): SpaceError {
  if (typeof body === 'object' && body !== null) {
    const err = (body as { error?: unknown }).error;
    if (typeof err === 'object' && err !== null) {
      const { code, message, details } = err as { code?: unknown; message?: unknown; details?: unknown };
      if (isErrorCode(code) && typeof message === 'string') {
        return new SpaceError(code, message.slice(0, 2000), parseDetails(details));
      }
    }
  }
  return new SpaceError(fallback, fallbackMessage);
}
