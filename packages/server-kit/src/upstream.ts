import { Agent, type ClientRequest, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as TlsAgent, request as tlsRequest } from 'node:https';
import { type ClientTls, clientTlsOptions } from './peer-tls.js';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { WebSocket } from 'ws';
import type { z } from 'zod';
import { ErrorCode, Limits, SpaceError, errorFromBody } from '@space/protocol';
import { resetAgentSockets } from './agent-sockets.js';
import { describeIssues } from './body.js';
import { readBounded, type BoundedReadOptions } from './bounded-read.js';
import { activeSpan, recordReportedSpan, spanClockNs } from './tracing.js';

const peerCloseWaitMs = 2000;

/** Half-closes the connection and resolves when the peer has closed it too (reset after `waitMs` otherwise). */
function closedByPeer(socket: Socket, waitMs: number): Promise<void> {
  return new Promise((resolve) => {
    socket.on('error', () => undefined);
    const timer = setTimeout(() => socket.resetAndDestroy(), waitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.end();
  });
}

/** A request lost on a reused connection the peer had closed: safe to send again. */
/** A peer that took the request and did not answer it within the call's time (frozen, hung, stopped): not one that refused it. */
export class NoAnswer extends SpaceError {}

class StaleConnection extends Error {
  constructor(override readonly cause: SpaceError) {
    super(cause.message);
  }
}

/**
 * A service one layer down (node agent or daemon) reached over HTTP with a bearer token. Replies
 * are bounded in size and validated against the schema the caller expects: the layer below is not
 * trusted to be well-formed.
 */
export class Upstream {
  // No socket cap: long-running calls (an exec may last hours) must not queue the short ones behind them.
  // Idle connections are closed from this side well before the peer's keep-alive timeout, so the
  // TIME_WAIT endpoint stays here (a daemon's sandbox cannot be checkpointed while it holds one).
  private readonly agent: Agent;

  constructor(
    readonly baseUrl: string,
    private readonly token: string,
    /** The error code for "cannot reach it at all". */
    private readonly unreachable: ErrorCode,
    readonly label: string,
    /** A peer that does not accept the connection within this long counts as unreachable. */
    private readonly connectTimeoutMs = 3000,
    /** For an `https://` peer: the CA its certificate must be signed by, and this side's certificate for mutual TLS. */
    private readonly tls: ClientTls = {},
    /** The service whose spans the peer's replies report (`space-agent-span`): the in-sandbox agent's, which cannot reach a collector. */
    private readonly reportingService: string | null = null,
  ) {
    this.agent = baseUrl.startsWith('https:') ? new TlsAgent({ keepAlive: true, timeout: 30_000 }) : new Agent({ keepAlive: true, timeout: 30_000 });
  }

  /** Times this side cut its connections (close, reset): a request lost to that is not sent again. */
  private cuts = 0;
  /** The requests sent and not answered yet (no response head, no error), with when each was sent (`performance.now()`). */
  private readonly waiting = new Map<ClientRequest, number>();
  /** When the peer last answered a request (a response head), `performance.now()`. */
  private lastAnswerAt = 0;

  /** How many requests wait for their answer. */
  get waitingCalls(): number {
    return this.waiting.size;
  }

  /**
   * How long requests have waited on a peer that answers none of them: since the later of its last
   * answer and the oldest waiting request's start; 0 with none waiting. A live peer answers some
   * call now and then; a frozen one's silence grows from its first unanswered request.
   */
  silentMs(now = performance.now()): number {
    // Sent in order, so the first entry is the oldest.
    const oldest = this.waiting.values().next();
    return oldest.done ? 0 : now - Math.max(oldest.value, this.lastAnswerAt);
  }

  /**
   * How many connections this side could not open (refused, unroutable, not accepted in time) since
   * it was made: the peer may be gone, or listening elsewhere now (a restarted node on a new port).
   */
  get failedConnections(): number {
    return this.connectFailures;
  }
  private connectFailures = 0;

  /**
   * Ends every request still waiting for its answer with `reason` (the caller's error, under this
   * peer's "unreachable" code), as if the peer had died; returns how many. For a peer found gone
   * that holds connections open without answering (frozen, or cut off by a network dropping its
   * packets), which no timeout of the call's own may end: some calls last an hour.
   */
  cutWaiting(reason: string): number {
    const cut = [...this.waiting.keys()];
    this.waiting.clear();
    if (cut.length > 0) this.cuts++;
    for (const req of cut) req.destroy(new SpaceError(this.unreachable, reason));
    return cut.length;
  }

  /** Closes every connection; later calls open new ones. */
  close(): void {
    this.cuts++;
    this.agent.destroy();
  }

  /** Aborts every connection with a TCP reset, so the peer keeps no endpoint of them (not even TIME_WAIT). */
  reset(): void {
    this.cuts++;
    resetAgentSockets(this.agent);
  }

  /**
   * Sends a request and returns the raw response (status not checked). A request whose reused
   * keep-alive connection the peer had closed (reset before any answer) is sent once more on a new
   * one, when its body can be sent again: the peer never read it (Node's documented pattern).
   */
  async send(
    method: string,
    pathAndQuery: string,
    body?: Buffer | Readable,
    extraHeaders: Record<string, string> = {},
    timeoutMs?: number,
    /** Aborting ends the request, also before the peer answered (its caller left). */
    signal?: AbortSignal,
  ): Promise<IncomingMessage> {
    const cutsBefore = this.cuts;
    try {
      return await this.sendOnce(method, pathAndQuery, body, extraHeaders, timeoutMs, signal);
    } catch (err) {
      if (!(err instanceof StaleConnection)) throw err;
      // Cut by this side (the sandbox stopped, a checkpoint's quiesce), or a body already sent: not again.
      if (this.cuts !== cutsBefore || (body !== undefined && !Buffer.isBuffer(body))) throw err.cause;
      return this.sendOnce(method, pathAndQuery, body, extraHeaders, timeoutMs, signal).catch((again: unknown) => {
        throw again instanceof StaleConnection ? again.cause : again;
      });
    }
  }

  private sendOnce(
    method: string,
    pathAndQuery: string,
    body: Buffer | Readable | undefined,
    extraHeaders: Record<string, string>,
    timeoutMs: number | undefined,
    signal?: AbortSignal,
  ): Promise<IncomingMessage> {
    const url = new URL(pathAndQuery, this.baseUrl);
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(new SpaceError(ErrorCode.REQUEST_ABORTED, 'the caller left before the request was sent'));
      const headers: Record<string, string | number> = { authorization: `Bearer ${this.token}`, ...extraHeaders };
      // A traced call goes on in the layer below, under the span it is made in.
      const span = activeSpan();
      if (span) headers.traceparent = span.traceparent;
      const sentNs = span ? spanClockNs() : 0n;
      if (Buffer.isBuffer(body)) {
        headers['content-type'] = 'application/json';
        headers['content-length'] = body.length;
      }
      // TLS options go with each request: the agent pools connections by them, so a renewed client certificate opens new ones.
      const tls = url.protocol === 'https:' ? clientTlsOptions(this.tls) : {};
      const req = (url.protocol === 'https:' ? tlsRequest : request)(
        url,
        { method, headers, agent: this.agent, ...tls, ...(signal ? { signal } : {}) },
        (res) => {
          const reported = res.headers['space-agent-span'];
          if (span && this.reportingService && typeof reported === 'string')
            recordReportedSpan(span, this.reportingService, `${method} ${url.pathname}`, reported, sentNs, spanClockNs());
          this.waiting.delete(req);
          this.lastAnswerAt = performance.now();
          resolve(res);
        },
      );
      this.waiting.set(req, performance.now());
      req.once('close', () => this.waiting.delete(req));
      let connecting = false;
      req.on('socket', (socket) => {
        if (!socket.connecting) return;
        connecting = true;
        const timer = setTimeout(
          () => req.destroy(new SpaceError(this.unreachable, `${this.label} did not accept a connection within ${this.connectTimeoutMs} ms`)),
          this.connectTimeoutMs,
        );
        socket.once('connect', () => {
          connecting = false;
          clearTimeout(timer);
        });
        socket.once('close', () => clearTimeout(timer));
      });
      if (timeoutMs) req.setTimeout(timeoutMs, () => req.destroy(new NoAnswer(this.unreachable, `${this.label} did not answer within ${timeoutMs} ms`)));
      req.on('error', (err: Error & { code?: string }) => {
        if (signal?.aborted) return reject(new SpaceError(ErrorCode.REQUEST_ABORTED, 'the caller left before the answer'));
        if (connecting) this.connectFailures++;
        const failure = err instanceof SpaceError ? err : new SpaceError(this.unreachable, `${this.label} unreachable: ${err.message}`);
        // The peer closed the idle connection as it was reused: nothing was read there.
        if (req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) reject(new StaleConnection(failure));
        else reject(failure);
      });
      if (Buffer.isBuffer(body) || body === undefined) req.end(body);
      else {
        body.on('error', (err) => req.destroy(err));
        body.pipe(req);
      }
    });
  }

  /**
   * Calls a JSON endpoint; a non-2xx reply becomes the SpaceError it carries. After the reply,
   * `resetAfter` aborts the connection with a TCP reset (the peer keeps nothing of it);
   * `awaitPeerClose` half-closes it and returns only once the peer has closed its end (or after
   * `peerCloseWaitMs`, with a reset): the peer has then released the connection, not just answered.
   */
  async json<S extends z.ZodTypeAny>(
    method: string,
    pathAndQuery: string,
    body: unknown,
    schema: S,
    options: { limit?: number; timeoutMs?: number; resetAfter?: boolean; awaitPeerClose?: boolean; headers?: Record<string, string> } = {},
  ): Promise<z.output<S>> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const res = await this.send(method, pathAndQuery, payload, options.headers, options.timeoutMs);
    const socket = res.socket as Socket;
    try {
      return await this.readJsonReply(res, schema, options.limit ?? Limits.maxJsonBodyBytes);
    } finally {
      if (options.awaitPeerClose && !socket.destroyed) await closedByPeer(socket, peerCloseWaitMs);
      else if (options.resetAfter && !socket.destroyed) socket.resetAndDestroy();
    }
  }

  async readJsonReply<S extends z.ZodTypeAny>(res: IncomingMessage, schema: S, limit: number): Promise<z.output<S>> {
    const raw = await readBounded(res, limit, this.replyBounds(limit));
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new SpaceError(ErrorCode.DAEMON_PROTOCOL_ERROR, `${this.label} sent a reply that is not JSON (status ${res.statusCode})`);
    }
    if ((res.statusCode ?? 500) >= 300) throw this.errorOf(parsed, res.statusCode);
    const checked = schema.safeParse(parsed);
    if (!checked.success) throw new SpaceError(ErrorCode.DAEMON_PROTOCOL_ERROR, `${this.label} sent a malformed reply: ${describeIssues(checked.error)}`);
    return checked.data;
  }

  async errorFrom(res: IncomingMessage): Promise<SpaceError> {
    const raw = await readBounded(res, 64 * 1024, this.replyBounds(64 * 1024));
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch {
      // not JSON: reported generically below
    }
    return this.errorOf(parsed, res.statusCode);
  }

  /** A reply larger than `limit` is the peer's fault; one cut short means the peer (or its sandbox) went away. */
  private replyBounds(limit: number): BoundedReadOptions {
    return {
      overflow: () => new SpaceError(ErrorCode.DAEMON_PROTOCOL_ERROR, `${this.label} sent more than ${limit} bytes; cut off`),
      interrupted: () => new SpaceError(this.unreachable, `${this.label} broke off its reply (connection lost)`),
      drain: false,
    };
  }

  private errorOf(parsed: unknown, status: number | undefined): SpaceError {
    return errorFromBody(parsed, ErrorCode.DAEMON_PROTOCOL_ERROR, `${this.label} failed with status ${status}`);
  }

  /**
   * Streams a download to `res`, refusing more bytes than the upstream announced (or than
   * `maxBytes`). Its type is ours to say (`contentType`, else bytes), never the upstream's.
   */
  async download(
    pathAndQuery: string,
    res: ServerResponse,
    headers: Record<string, string> = {},
    { contentType = 'application/octet-stream', maxBytes = Number.MAX_SAFE_INTEGER }: { contentType?: string; maxBytes?: number } = {},
  ): Promise<void> {
    const up = await this.send('GET', pathAndQuery, undefined, headers);
    if (up.statusCode !== 200) throw await this.errorFrom(up);
    const length = Number(up.headers['content-length']);
    if (!Number.isSafeInteger(length) || length < 0 || length > maxBytes) {
      up.destroy();
      throw new SpaceError(ErrorCode.DAEMON_PROTOCOL_ERROR, `${this.label} sent a download without a valid content-length (at most ${maxBytes} bytes)`);
    }
    res.writeHead(200, { 'content-type': contentType, 'content-length': length });
    up.on('error', (err) => res.destroy(err));
    up.pipe(res);
    await new Promise<void>((resolve) => res.on('close', resolve));
  }

  /** Opens a WebSocket to the upstream path. */
  socket(pathAndQuery: string, headers: Record<string, string> = {}): WebSocket {
    const url = new URL(pathAndQuery, this.baseUrl.replace(/^http/, 'ws'));
    return new WebSocket(url, {
      headers: { ...headers, authorization: `Bearer ${this.token}` },
      maxPayload: Limits.maxStreamMessageBytes * 2,
      agent: undefined,
      ...clientTlsOptions(this.tls),
    });
  }
}
