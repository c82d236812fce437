/**
 * An error the SPACE API answered with. `code` is one of the stable codes in docs/api.md
 * (e.g. `SESSION_NOT_FOUND`, `SANDBOX_DIED`); compare codes, not classes.
 */
export class SpaceApiError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    message: string,
    /** Machine-readable facts, e.g. `fallbackCheckpointId` when a full checkpoint was refused. */
    readonly details: Record<string, string | number | boolean> = {},
    /** Names the request in the server's log: quote it when reporting a 500. */
    readonly requestId: string | null = null,
  ) {
    super(message);
    this.name = 'SpaceApiError';
  }
}

/** Raised locally, never by the server: bad configuration, timeouts, aborted calls. */
export class SpaceClientError extends Error {
  constructor(
    readonly code: 'CONFIGURATION' | 'TIMEOUT' | 'ABORTED' | 'NETWORK' | 'PROTOCOL',
    message: string,
  ) {
    super(message);
    this.name = 'SpaceClientError';
  }
}

export function isSpaceApiError(err: unknown, code?: string): err is SpaceApiError {
  return (
    typeof err === 'object' &&
    err !== null &&
    (err as { name?: unknown }).name === 'SpaceApiError' &&
    (code === undefined || (err as SpaceApiError).code === code)
  );
}
