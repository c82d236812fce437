import type { WebSocket } from 'ws';
import { ErrorCode } from '@space/protocol';

export interface RelayOptions {
  /** Checks each message coming up from below; false closes both sides. */
  validateUpstream?: (message: unknown) => boolean;
  /** Most messages per second accepted from below before it is cut off. */
  maxUpstreamRate?: number;
  label: string;
  /** Client messages that arrived before the relay was set up, sent first and in order. */
  early?: string[];
  /** Changes a (valid) message from below before it goes up; the same object passes unchanged. */
  rewriteUpstream?: (message: unknown) => unknown;
}

/**
 * Starts queueing a client's messages at once, for a relay that is set up only after some async
 * work (finding or resuming the sandbox): a start message sent right after connecting is not lost.
 */
export function holdMessages(client: WebSocket): () => string[] {
  const held: string[] = [];
  const hold = (raw: unknown, isBinary: boolean): void => {
    if (!isBinary) held.push(String(raw));
  };
  client.on('message', hold);
  return () => {
    client.off('message', hold);
    return held;
  };
}

/**
 * Joins a client WebSocket to one a layer down. Messages from below are parsed and checked before
 * they are passed on; garbage or a flood closes both sockets and the client gets a clear error.
 */
/** Sends a stream error frame (`{type: "error", code, message}`) and closes the socket with 1011. */
export function closeWithError(ws: WebSocket, code: string, message: string): void {
  if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'error', code, message }));
  // A close reason is limited to 123 bytes; the full text went in the frame above.
  ws.close(1011, code.slice(0, 100));
}

/** How long messages a client sent before it closed may take to reach the layer below. */
const flushAfterCloseMs = 10_000;

/**
 * Closes `upstream` once what the client sent has gone down: a client may send stdin (or a signal)
 * and close at once, before the layer below even answered; those messages still arrive, in order.
 */
function closeAfterFlush(upstream: WebSocket, pending: string[]): void {
  upstream.on('error', () => undefined);
  const giveUp = setTimeout(() => upstream.terminate(), flushAfterCloseMs);
  giveUp.unref();
  upstream.once('close', () => clearTimeout(giveUp));
  if (upstream.readyState === upstream.OPEN) return void upstream.close(1000);
  if (upstream.readyState !== upstream.CONNECTING) return void upstream.terminate();
  upstream.once('open', () => {
    for (const text of pending.splice(0)) upstream.send(text);
    upstream.close(1000);
  });
}

export function relaySockets(client: WebSocket, upstream: WebSocket, options: RelayOptions): void {
  const pending: string[] = [...(options.early ?? [])];
  // The client may have gone (or broken the protocol) while the layer below was being found.
  if (client.readyState === client.CLOSING || client.readyState === client.CLOSED) {
    if (pending.length > 0) return closeAfterFlush(upstream, pending);
    upstream.on('error', () => undefined);
    return void upstream.terminate();
  }
  let windowStart = Date.now();
  let count = 0;
  const maxRate = options.maxUpstreamRate ?? 5000;

  const fail = (code: string, message: string): void => {
    closeWithError(client, code, message);
    upstream.terminate();
  };

  client.on('message', (raw, isBinary) => {
    const text = isBinary ? null : raw.toString();
    if (text === null) return fail(ErrorCode.VALIDATION_FAILED, 'binary frames are not accepted');
    if (upstream.readyState === upstream.OPEN) upstream.send(text);
    else pending.push(text);
  });
  upstream.on('open', () => {
    for (const text of pending.splice(0)) upstream.send(text);
  });
  upstream.on('message', (raw, isBinary) => {
    const now = Date.now();
    if (now - windowStart > 1000) {
      windowStart = now;
      count = 0;
    }
    if (++count > maxRate) return fail(ErrorCode.DAEMON_PROTOCOL_ERROR, `${options.label} sent more than ${maxRate} messages per second; cut off`);
    if (isBinary) return fail(ErrorCode.DAEMON_PROTOCOL_ERROR, `${options.label} sent a binary frame`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString());
    } catch {
      return fail(ErrorCode.DAEMON_PROTOCOL_ERROR, `${options.label} sent a message that is not JSON`);
    }
    if (options.validateUpstream && !options.validateUpstream(parsed))
      return fail(ErrorCode.DAEMON_PROTOCOL_ERROR, `${options.label} sent a malformed message`);
    const message = options.rewriteUpstream ? options.rewriteUpstream(parsed) : parsed;
    if (client.readyState === client.OPEN) client.send(message === parsed ? raw.toString() : JSON.stringify(message));
  });
  upstream.on('unexpected-response', (_req, res) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.length < 16 && chunks.push(c));
    res.on('end', () => {
      let body: { error?: { code?: string; message?: string } } = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString());
      } catch {
        // fall through to a generic error
      }
      fail(body.error?.code ?? ErrorCode.SANDBOX_UNAVAILABLE, body.error?.message ?? `${options.label} refused the stream (status ${res.statusCode})`);
    });
  });
  upstream.on('error', (err) => fail(ErrorCode.SANDBOX_UNAVAILABLE, `${options.label} unreachable: ${err.message}`));
  upstream.on('close', (code, reason) => {
    if (client.readyState === client.OPEN) client.close(code === 1005 || code === 1006 ? 1000 : code, reason);
  });
  // A client that said goodbye gets what it sent delivered first; one that broke off does not.
  client.on('close', (code) => (code === 1000 || code === 1005 ? closeAfterFlush(upstream, pending) : upstream.terminate()));
  client.on('error', () => upstream.terminate());
}
