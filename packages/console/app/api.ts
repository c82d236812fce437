/** The API key of this tab (session storage: gone when the tab closes), and calls of the public API with it. */
const storageKey = 'space.apiKey';

export function apiKey(): string | null {
  return sessionStorage.getItem(storageKey);
}

export function signIn(key: string): void {
  sessionStorage.setItem(storageKey, key);
}

export function signOut(): void {
  sessionStorage.removeItem(storageKey);
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
export async function call(method: string, path: string, body?: unknown, raw?: BodyInit): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey() ?? ''}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body !== undefined ? JSON.stringify(body) : raw });
  if (!res.ok) {
    const reply = (await res.json().catch(() => null)) as { error?: { code: string; message: string } } | null;
    throw new ApiError(res.status, reply?.error?.code ?? 'HTTP_ERROR', reply?.error?.message ?? `${method} ${path}: ${res.status}`);
  }
  return res;
}

export async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  return (await call(method, path, body)).json() as Promise<T>;
}

/** A stream of the API: a browser cannot set headers on a WebSocket, so the key goes as a subprotocol the server reads and never echoes. */
export function socket(path: string): WebSocket {
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${path}`;
  return new WebSocket(url, ['space', `space-key.${apiKey() ?? ''}`]);
}

export const q = (p: string) => `?path=${encodeURIComponent(p)}`;
