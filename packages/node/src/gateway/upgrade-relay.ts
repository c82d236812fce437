import type { IncomingMessage } from 'node:http';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { headerLines, refuseRaw, type Admission } from './admission.js';
import type { SecretRewriter } from './secret-rewriter.js';

/**
 * A protocol upgrade (WebSocket) the gateway admitted: placeholders are swapped in its request line
 * and headers, then the sandbox's connection and the upstream one are joined byte for byte. Frames
 * are not searched for echoed values (replacing inside a frame would break its length).
 */
export function relayUpgrade(req: IncomingMessage, socket: Socket, head: Buffer, target: Admission, outbound: SecretRewriter, ca: string | undefined): void {
  const { entry, host } = target;
  const headers = outbound.rewriteHeaders({ ...req.headers });
  const path = outbound.rewrite(req.url ?? '/');
  entry.secrets = [...outbound.used];
  const upstream = target.tls
    ? tlsConnect({ host: target.address, port: target.port, servername: isIP(host) ? undefined : host, ca, ALPNProtocols: ['http/1.1'] })
    : netConnect(target.port, target.address);
  let status = 0;
  let settled = false;
  const settle = (reason?: string): void => {
    if (settled) return;
    settled = true;
    entry.secrets = [...outbound.used];
    target.finish(status || 502, status ? 'allowed' : 'failed', reason);
  };
  upstream.setTimeout(30_000, () => upstream.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
  upstream.once(target.tls ? 'secureConnect' : 'connect', () => {
    upstream.setTimeout(0);
    upstream.write(`${req.method} ${path} HTTP/1.1\r\n${headerLines(headers)}\r\n`);
    if (head.length) upstream.write(head);
    socket.pipe(upstream);
    upstream.pipe(socket);
  });
  upstream.once('data', (chunk: Buffer) => (status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(chunk.toString('latin1', 0, 16))?.[1] ?? 0)));
  upstream.on('data', (chunk: Buffer) => (entry.bytesReceived += chunk.length));
  socket.on('data', (chunk: Buffer) => (entry.bytesSent += chunk.length));
  upstream.on('error', (err: NodeJS.ErrnoException) => {
    const reason = `upstream ${host}: ${err.code ?? err.message}`;
    if (!status) refuseRaw(socket, 502, reason, 'UPSTREAM_FAILED');
    else socket.destroy();
    settle(reason);
  });
  upstream.on('close', () => {
    socket.end();
    settle();
  });
  socket.on('close', () => {
    upstream.destroy();
    settle();
  });
}
