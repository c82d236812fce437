import { WebSocket } from 'ws';

export interface ApiReply<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** A series' value in a /metrics text, e.g. `space_pool_ready{template="tiny"}`; NaN when absent. */
export function metricValue(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return Number(line?.slice(series.length + 1) ?? NaN);
}

/** A minimal HTTP client for the public API, as `curl` would use it. */
export class Api {
  constructor(
    readonly url: string,
    readonly key: string | null,
  ) {}

  async call<T = any>(
    method: string,
    path: string,
    body?: unknown,
    init: { raw?: string | Buffer; headers?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<ApiReply<T>> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.key) headers.authorization = `Bearer ${this.key}`;
    let payload: string | Blob | undefined = typeof init.raw === 'string' || init.raw === undefined ? init.raw : new Blob([new Uint8Array(init.raw)]);
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    const send = () => fetch(this.url + path, { method, headers, body: payload, signal: init.signal });
    const res = await send().catch((err: Error & { cause?: { code?: string } }) => {
      // A keep-alive connection the platform closed after 30 s idle, while this process sat in a
      // long synchronous check (a sandbox's memory searched) and could not drop it in time, fails
      // the next request on it before the platform reads it: sent once more on a new connection.
      // (fetch does so itself for GET; a platform that is gone refuses the second one too.)
      if (err.cause?.code !== 'UND_ERR_SOCKET') throw err;
      return send();
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // raw body
    }
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  async bytes(path: string): Promise<{ status: number; data: Buffer }> {
    const res = await fetch(this.url + path, { headers: this.key ? { authorization: `Bearer ${this.key}` } : {} });
    return { status: res.status, data: Buffer.from(await res.arrayBuffer()) };
  }

  socket(path: string): WebSocket {
    return new WebSocket(this.url.replace(/^http/, 'ws') + path, { headers: this.key ? { authorization: `Bearer ${this.key}` } : {} });
  }

  async createSession(body: Record<string, unknown> = {}): Promise<any> {
    const reply = await this.call('POST', '/v1/sessions', body);
    if (reply.status !== 201) throw new Error(`create failed: ${reply.status} ${JSON.stringify(reply.body)}`);
    return reply.body;
  }

  async exec(sessionId: string, cmd: string | string[], extra: Record<string, unknown> = {}): Promise<any> {
    const reply = await this.call('POST', `/v1/sessions/${sessionId}/exec`, { cmd, ...extra });
    if (reply.status !== 200) throw new Error(`exec failed: ${reply.status} ${JSON.stringify(reply.body)}`);
    return reply.body;
  }
}

/** Collects every message of a stream socket until it closes. */
export function collectSocket(ws: WebSocket, onOpen?: (ws: WebSocket) => void): Promise<any[]> {
  return new Promise((resolve, reject) => {
    const messages: any[] = [];
    ws.on('open', () => onOpen?.(ws));
    ws.on('message', (raw) => messages.push(JSON.parse(raw.toString())));
    ws.on('close', () => resolve(messages));
    ws.on('error', reject);
  });
}

export function decodeOutput(messages: any[], type: 'stdout' | 'stderr'): string {
  return messages
    .filter((m) => m.type === type)
    .map((m) => Buffer.from(m.data, 'base64').toString())
    .join('');
}
