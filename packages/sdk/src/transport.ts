import { randomUUID } from 'node:crypto';
import { WebSocket } from 'ws';
import { SpaceApiError, SpaceClientError } from './errors.js';
import type { CallOptions, ResolvedOptions } from './options.js';

/**
 * Where each call names its timeout to the server, which then drops it unrun if it is still
 * waiting for its session (a resume, a move) when the caller has given up (the protocol's header of
 * that name; a type check in the tests holds them equal).
 */
export const CALL_TIMEOUT_HEADER = 'x-space-timeout-ms';
/**
 * Where each call that changes something names its idempotency key: a retry with it gets the first
 * outcome instead of running again (the protocol's header of that name).
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** The longest timeout the server takes from the header (a day); a longer one is not sent. */
const maxNamedTimeoutMs = 86_400_000;

/** Errors of a connection that never reached a control plane: the call can go to another one unchanged. */
const notConnected = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

function causeCode(err: unknown): string | undefined {
  const cause = (err as { cause?: { code?: string } }).cause;
  return cause?.code ?? (err as { code?: string }).code;
}

/**
 * HTTP and WebSocket calls to the API with the key, timeouts, cancellation and typed errors. With
 * several control planes, a call that cannot connect to the one in use goes to the next, and that
 * one is used from then on. A call that changes something carries an idempotency key (the same on
 * each retry): one whose connection broke after it was sent is sent again once, and the server
 * answers with the first outcome if it had run.
 */
export class Transport {
  private current = 0;

  constructor(readonly options: ResolvedOptions) {}

  /** The URL of the control plane in use. */
  get apiUrl(): string {
    return this.options.apiUrls[this.current]!;
  }

  async request(
    method: string,
    path: string,
    init: CallOptions & { json?: unknown; body?: BodyInit; headers?: Record<string, string> } = {},
    attemptsOf429 = 0,
  ): Promise<Response> {
    const timeoutMs = init.timeoutMs ?? this.options.timeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.apiKey}`, ...init.headers };
    if (timeoutMs <= maxNamedTimeoutMs) headers[CALL_TIMEOUT_HEADER] = String(Math.max(1, Math.round(timeoutMs)));
    if (method !== 'GET') {
      // One key for the call, kept for its retries below.
      init = { ...init, idempotencyKey: init.idempotencyKey ?? randomUUID() };
      headers[IDEMPOTENCY_KEY_HEADER] = init.idempotencyKey!;
    }
    let body = init.body;
    if (init.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    let res: Response | null = null;
    // A streamed body can be sent once only; anything else may go to each control plane in turn,
    // and once more after its answer was lost (a GET changes nothing, anything else has its key).
    const streamed = body instanceof ReadableStream;
    const attempts = streamed ? 1 : this.options.apiUrls.length;
    let resent = streamed;
    for (let attempt = 0; res === null; attempt++) {
      const url = this.apiUrl;
      try {
        res = await fetch(url + path, {
          method,
          headers,
          body,
          signal,
          ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
        } as RequestInit);
      } catch (err) {
        if (timeout.aborted) throw new SpaceClientError('TIMEOUT', `${method} ${path} took longer than ${timeoutMs} ms (pass timeoutMs to wait longer)`);
        if (init.signal?.aborted) throw new SpaceClientError('ABORTED', `${method} ${path} was aborted`);
        const reached = !notConnected.has(causeCode(err) ?? '');
        // Never reached the one in use: the next one. Reached, and the answer lost: once more, with its key.
        if ((!reached && attempt + 1 < attempts) || (reached && !resent)) {
          if (reached) resent = true;
          this.current = (this.current + 1) % this.options.apiUrls.length;
          continue;
        }
        throw new SpaceClientError('NETWORK', `cannot reach SPACE at ${url}: ${(err as Error).message} (is "space up" running? is SPACE_API_URL right?)`);
      }
    }
    const waitOut = res.status === 429 || (res.status === 409 && res.headers.get('retry-after') !== null && (await isInProgress(res)));
    if (waitOut && attemptsOf429 < this.options.retry.attempts && !streamed && !init.signal?.aborted) {
      // Refused before anything was done, or its first sending still runs: waited out and sent again (the same body and key).
      const waitMs = Math.min(this.options.retry.maxWaitMs, 1000 * (Number(res.headers.get('retry-after')) || 1));
      await res.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, waitMs));
      return this.request(method, path, init, attemptsOf429 + 1);
    }
    if (!res.ok) throw await errorFrom(res);
    return res;
  }

  async json<T>(method: string, path: string, init: CallOptions & { json?: unknown } = {}): Promise<T> {
    const res = await this.request(method, path, init);
    return (await res.json()) as T;
  }

  /**
   * Opens a stream. A handshake the API refuses (404, 401, 429, ...) carries its JSON error: that
   * SpaceApiError becomes the socket's first 'error', before it closes.
   */
  socket(path: string): WebSocket {
    const used = this.current;
    const ws = new WebSocket(this.apiUrl.replace(/^http/, 'ws') + path, { headers: { authorization: `Bearer ${this.options.apiKey}` } });
    // A control plane that cannot be reached: the stream's next attempt (re-attach) goes to the next one.
    ws.once('error', (err) => {
      if (notConnected.has(causeCode(err) ?? '') && this.current === used) this.current = (used + 1) % this.options.apiUrls.length;
    });
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.length < 64 && chunks.push(chunk));
      res.on('end', () => {
        const requestId = res.headers['x-request-id'];
        ws.emit('error', apiErrorOf(res.statusCode ?? 0, Buffer.concat(chunks).toString(), typeof requestId === 'string' ? requestId : null));
        ws.terminate();
      });
    });
    return ws;
  }
}

/** Whether a 409 says the first call with this idempotency key still runs (read from a clone: the body stays readable). */
async function isInProgress(res: Response): Promise<boolean> {
  return (
    await res
      .clone()
      .text()
      .catch(() => '')
  ).includes('"IDEMPOTENCY_IN_PROGRESS"');
}

async function errorFrom(res: Response): Promise<SpaceApiError> {
  return apiErrorOf(res.status, await res.text().catch(() => ''), res.headers.get('x-request-id'));
}

/** The API's `{error: {code, message, details, requestId}}` body as a SpaceApiError (HTTP_ERROR when it is not one). */
function apiErrorOf(status: number, text: string, requestIdHeader: string | null): SpaceApiError {
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string; details?: Record<string, string | number | boolean>; requestId?: string } };
    if (body.error?.code)
      return new SpaceApiError(
        body.error.code,
        status,
        body.error.message ?? body.error.code,
        body.error.details ?? {},
        body.error.requestId ?? requestIdHeader,
      );
  } catch {
    // not JSON
  }
  return new SpaceApiError('HTTP_ERROR', status, `HTTP ${status}: ${text.slice(0, 200)}`, {}, requestIdHeader);
}
