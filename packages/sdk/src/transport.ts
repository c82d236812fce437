import { WebSocket } from 'ws';
import { SpaceApiError, SpaceClientError } from './errors.js';
import type { CallOptions, ResolvedOptions } from './options.js';

/** HTTP and WebSocket calls to the API with the key, timeouts, cancellation and typed errors. */
export class Transport {
  constructor(readonly options: ResolvedOptions) {}

  async request(method: string, path: string, init: CallOptions & { json?: unknown; body?: BodyInit; headers?: Record<string, string> } = {}): Promise<Response> {
    const timeoutMs = init.timeoutMs ?? this.options.timeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.apiKey}`, ...init.headers };
    let body = init.body;
    if (init.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    let res: Response;
    try {
      res = await fetch(this.options.apiUrl + path, { method, headers, body, signal, ...(body instanceof ReadableStream ? { duplex: 'half' } : {}) } as RequestInit);
    } catch (err) {
      if (timeout.aborted) throw new SpaceClientError('TIMEOUT', `${method} ${path} took longer than ${timeoutMs} ms (pass timeoutMs to wait longer)`);
      if (init.signal?.aborted) throw new SpaceClientError('ABORTED', `${method} ${path} was aborted`);
      throw new SpaceClientError('NETWORK', `cannot reach SPACE at ${this.options.apiUrl}: ${(err as Error).message} (is "space up" running? is SPACE_API_URL right?)`);
    }
    if (!res.ok) throw await errorFrom(res);
    return res;
  }

  async json<T>(method: string, path: string, init: CallOptions & { json?: unknown } = {}): Promise<T> {
    const res = await this.request(method, path, init);
    return (await res.json()) as T;
  }

  socket(path: string): WebSocket {
    return new WebSocket(this.options.apiUrl.replace(/^http/, 'ws') + path, { headers: { authorization: `Bearer ${this.options.apiKey}` } });
  }
}

async function errorFrom(res: Response): Promise<SpaceApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string; details?: Record<string, string | number | boolean>; requestId?: string } };
    if (body.error?.code) return new SpaceApiError(body.error.code, res.status, body.error.message ?? body.error.code, body.error.details ?? {}, body.error.requestId ?? res.headers.get('x-request-id'));
  } catch {
    // not JSON
  }
  return new SpaceApiError('HTTP_ERROR', res.status, `HTTP ${res.status}: ${text.slice(0, 200)}`, {}, res.headers.get('x-request-id'));
}
