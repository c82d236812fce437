/**
 * The header in which a client names how long it waits for a call, in milliseconds (the SDKs send
 * their call timeout). A call still waiting for its session (behind a restore, a move, a resume) when
 * that has passed, or when its client has left, is dropped instead of run for nobody
 * (`DEADLINE_EXCEEDED`).
 */
export const CALL_TIMEOUT_HEADER = 'x-space-timeout-ms';

/** The longest budget a client may name: a day. */
export const maxCallTimeoutMs = 86_400_000;

/** A header's budget, or null when it names none or something that is not a positive whole number of milliseconds. */
export function callTimeoutOf(value: string | string[] | undefined): number | null {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text || !/^\d{1,9}$/.test(text.trim())) return null;
  const ms = Number(text.trim());
  return ms > 0 ? Math.min(ms, maxCallTimeoutMs) : null;
}
