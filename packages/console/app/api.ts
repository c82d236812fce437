/**
 * Calls of the public API from the console. The key is never in script-readable storage: signing in
 * hands it to the control plane, which keeps it in an HttpOnly cookie (SameSite=Strict) that the
 * browser sends along; every call also carries the console's header, which the control plane
 * requires with that cookie (another origin, such as a preview page, cannot send it).
 */
const consoleHeader = { 'x-space-console': '1' };

/** Signs in: the control plane checks the key and keeps it in the console's cookie. */
export async function signIn(key: string): Promise<void> {
  await call('POST', '/console/session', { key });
}

export async function signOut(): Promise<void> {
  await call('DELETE', '/console/session').catch(() => undefined);
}

/** Whether the console's cookie holds a key that still works (asked of the API once at load). */
export function signedIn(): Promise<boolean> {
  return call('GET', '/v1/limits').then(
    () => true,
    () => false,
  );
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** A call of the public API; an error answer becomes an ApiError with its code and message. */
export async function call(method: string, path: string, body?: unknown, raw?: BodyInit, signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = { ...consoleHeader };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body !== undefined ? JSON.stringify(body) : raw, signal });
  if (!res.ok) {
    const reply = (await res.json().catch(() => null)) as { error?: { code: string; message: string } } | null;
    throw new ApiError(res.status, reply?.error?.code ?? 'HTTP_ERROR', reply?.error?.message ?? `${method} ${path}: ${res.status}`);
  }
  return res;
}

export async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  return (await call(method, path, body)).json() as Promise<T>;
}

/** A stream of the API: the browser sends the console's cookie with the handshake, which the control plane takes from this origin only. */
export function socket(path: string): WebSocket {
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${path}`;
  return new WebSocket(url, ['space']);
}

export const q = (p: string) => `?path=${encodeURIComponent(p)}`;

/** Reads a streamed reply as text records ending in `separator` (`\n` for JSON lines, `\n\n` for server-sent events), each as it comes. */
export async function readRecords(res: Response, separator: string, onRecord: (record: string) => void): Promise<void> {
  if (!res.body) throw new Error('the reply has no body');
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    for (let end = buffer.indexOf(separator); end !== -1; end = buffer.indexOf(separator)) {
      const record = buffer.slice(0, end);
      buffer = buffer.slice(end + separator.length);
      if (record) onRecord(record);
    }
  }
}
