/**
 * The header a client names a call's idempotency key in: a retry of the call with the same key
 * (after a dropped connection, a timeout, a control plane's death) gets the first call's outcome
 * instead of running again. Taken on exec, file writes and lifecycle calls (`idempotent` in the
 * route tables); the SDKs send one with every such call, the same on each of its retries.
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/** 1-255 visible ASCII characters (a UUID is the usual choice). */
export const idempotencyKeyPattern = /^[\x21-\x7e]{1,255}$/;
