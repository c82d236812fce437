import { type ClientRequest, type IncomingMessage, request as httpRequest, STATUS_CODES } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type Socket } from 'node:net';
import { pipeline } from 'node:stream';
import { headerLines, refuseRaw, type Admission, type Rewriters } from './admission.js';
import { idleAsUpgraded, upgradedIdleMs } from './gateway-connections.js';

/** How long the upstream has to answer an upgrade request. */
const answerTimeoutMs = 30_000;

/**
 * A protocol upgrade (WebSocket) the gateway admitted. Placeholders are swapped in its request line
 * and headers. An answer that is not `101 Switching Protocols` is an ordinary response, masked like
 * any other (headers and body, the body then ending with the connection). After a 101 the two
 * connections are joined byte for byte: frames are not searched for echoed values (replacing inside
 * a frame would break its length), which docs/security.md says.
 */
export function relayUpgrade(
  req: IncomingMessage,
  socket: Socket,
  head: Buffer,
  target: Admission,
  { outbound, inbound }: Rewriters,
  headers: Record<string, string | string[] | undefined>,
  ca: string | undefined,
): void {
  const { entry, host } = target;
  const sent = outbound.rewriteHeaders(headers);
  const path = outbound.rewrite(req.url ?? '/');
  entry.secrets = [...outbound.used];
  const send = target.tls ? httpsRequest : httpRequest;
  const upstream: ClientRequest = send({
    host: target.address,
    port: target.port,
    method: req.method,
    path,
    headers: { ...sent, connection: 'Upgrade', upgrade: String(req.headers.upgrade ?? '') },
    agent: false,
    ...(target.tls ? { servername: isIP(host) ? undefined : host, ca, ALPNProtocols: ['http/1.1'] } : {}),
    timeout: answerTimeoutMs,
  });
  // The answer's status once it came; the audit entry is written when the exchange ends, with its bytes.
  let status = 0;
  let settled = false;
  const settle = (reason?: string): void => {
    if (settled) return;
    settled = true;
    target.finish(status || 502, status ? 'allowed' : 'failed', reason);
  };
  const statusLine = (code: number, message?: string) => `HTTP/1.1 ${code} ${message || STATUS_CODES[code] || ''}\r\n`;
  socket.on('data', (chunk: Buffer) => (entry.bytesSent += chunk.length));
  socket.once('close', () => {
    upstream.destroy();
    settle(status ? undefined : 'the sandbox closed the connection before the upstream answered');
  });
  upstream.on('timeout', () => upstream.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
  upstream.on('error', (err: NodeJS.ErrnoException) => {
    const reason = `upstream ${host}: ${err.code ?? err.message}`;
    if (!status) refuseRaw(socket, 502, reason, 'UPSTREAM_FAILED');
    else socket.destroy();
    settle(reason);
  });
  upstream.on('upgrade', (answer: IncomingMessage, upstreamSocket: Socket, upstreamHead: Buffer) => {
    status = 101;
    socket.write(`${statusLine(101, answer.statusMessage)}${headerLines(inbound.rewriteHeaders(answer.headers))}\r\n`);
    if (upstreamHead.length) socket.write(upstreamHead);
    if (head.length) upstreamSocket.write(head);
    upstreamSocket.on('data', (chunk: Buffer) => (entry.bytesReceived += chunk.length));
    upstreamSocket.setTimeout(upgradedIdleMs, () => upstreamSocket.destroy());
    idleAsUpgraded(socket);
    upstreamSocket.on('error', () => socket.destroy());
    upstreamSocket.once('close', () => socket.destroy());
    socket.once('close', () => upstreamSocket.destroy());
    upstreamSocket.pipe(socket);
    socket.pipe(upstreamSocket);
  });
  upstream.on('response', (answer: IncomingMessage) => {
    // Not a 101: an ordinary answer, masked as any is; its length may change, so it ends with the connection.
    status = answer.statusCode ?? 502;
    const answerHeaders = inbound.rewriteHeaders(answer.headers);
    for (const name of ['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade']) delete answerHeaders[name];
    socket.write(`${statusLine(status, answer.statusMessage)}${headerLines({ ...answerHeaders, connection: 'close' })}\r\n`);
    answer.on('data', (chunk: Buffer) => (entry.bytesReceived += chunk.length));
    pipeline(answer, inbound.stream(), socket, (err) => {
      socket.destroy();
      settle(err ? `upstream ${host}: ${err.message}` : undefined);
    });
  });
  upstream.end();
}
