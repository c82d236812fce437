import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import { ErrorCode, SpaceError } from '@space/protocol';
import type { ServerTls } from './peer-tls.js';
import type { Router } from './router.js';

/** How long one server waits for a client; every bound has a default fit for the public API. */
export interface ConnectionBounds {
  /** Time for a request's headers to arrive (a slow-headers client is cut off with 408). */
  headersTimeoutMs: number;
  /** Time for a whole request to arrive, body included (uploads stream, so keep it generous; a stalled body is cut off sooner, see Limits.bodyIdleTimeoutMs). */
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: number;
  /** Open connections at most; more are closed at once. */
  maxConnections: number;
}

const defaultConnectionBounds: ConnectionBounds = {
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 60 * 60_000,
  keepAliveTimeoutMs: 30_000,
  maxConnections: 2048,
};

/** Starts an HTTP server for a router; resolves once it listens (port 0 picks a free port). */
export async function listen(
  router: Router,
  host: string,
  port: number,
  bounds: Partial<ConnectionBounds> = {},
  /** Serves HTTPS with this certificate and key (PEM) instead of HTTP; with `clientCa`, mutual TLS. */
  tls?: ServerTls,
): Promise<{ server: Server; port: number }> {
  const server = createBoundedServer(router, { ...defaultConnectionBounds, ...bounds }, tls);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}

/**
 * An HTTP server for a router with every wait bounded: headers, whole requests and idle keep-alive
 * connections time out, connections are capped, and what cannot be routed at all (a malformed
 * request line, headers too large, `CONNECT`) is answered with a JSON error and the connection
 * closed, never dropped silently.
 */
function createBoundedServer(router: Router, bounds: ConnectionBounds, tls?: ServerTls): Server {
  const options = {
    headersTimeout: bounds.headersTimeoutMs,
    requestTimeout: bounds.requestTimeoutMs,
    keepAliveTimeout: bounds.keepAliveTimeoutMs,
    // Checks for expired header and request timers this often (Node's default is 30 s).
    connectionsCheckingInterval: Math.min(5_000, bounds.headersTimeoutMs),
  };
  // A TLS client without a certificate of the client CA is answered why on its first request
  // (the handshake's own refusal would only hang up on it), and nothing of it is routed.
  const refusal = (req: IncomingMessage): SpaceError | null => (tls?.clientCa ? clientRefusal(req.socket as TLSSocket) : null);
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const refused = refusal(req);
    if (refused) return void refuse(req.socket, refused);
    void router.handle(req, res);
  };
  const server: Server = tls ? createTlsServer({ ...options, ...serverTlsOptions(tls) }, handle) : createServer(options, handle);
  if (tls?.clientCa && tls.onRefused) {
    const { onRefused } = tls;
    server.on('secureConnection', (socket: TLSSocket) => {
      const refused = clientRefusal(socket);
      if (refused) onRefused(`refused a TLS client at ${socket.remoteAddress ?? 'an unknown address'}: ${refused.message}`);
    });
  }
  server.maxConnections = bounds.maxConnections;
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const refused = refusal(req);
    if (refused) return refuse(socket, refused);
    void router.handleUpgrade(req, socket, head);
  });
  server.on('connect', (_req: IncomingMessage, socket: Duplex) =>
    refuse(socket, new SpaceError(ErrorCode.METHOD_NOT_ALLOWED, 'CONNECT is not supported: this is not a proxy')),
  );
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => refuse(socket, clientErrorOf(err)));
  return server;
}

/** Node's TLS server options of `tls`: with a client CA, each client's certificate is asked for and checked against it (refused after the handshake, above). */
export function serverTlsOptions(tls: ServerTls): { cert: string; key: string; ca?: string; requestCert?: boolean; rejectUnauthorized?: boolean } {
  return { cert: tls.cert, key: tls.key, ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: false } : {}) };
}

/** Why a mutual TLS client is refused (no certificate, or one not of the client CA); null: it is not. */
function clientRefusal(socket: TLSSocket): SpaceError | null {
  if (socket.authorized) return null;
  const error = String(socket.authorizationError);
  const which = !socket.getPeerCertificate()?.subject
    ? 'it presented no certificate'
    : /EXPIRED/.test(error)
      ? 'its certificate has expired'
      : /NOT_YET_VALID/.test(error)
        ? 'its certificate is not valid yet'
        : /INVALID_PURPOSE/.test(error)
          ? 'its certificate is not one for clients'
          : 'its certificate is not of the CA this server takes';
  return new SpaceError(ErrorCode.UNAUTHORIZED, `only clients with a certificate of this server's CA are served (mutual TLS): ${which} (${error})`);
}

/** What Node's HTTP parser rejected, as the client's error. */
function clientErrorOf(err: NodeJS.ErrnoException): SpaceError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new SpaceError(ErrorCode.HEADERS_TOO_LARGE, 'request headers are too large');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new SpaceError(ErrorCode.REQUEST_TIMEOUT, 'the request did not arrive in time');
    default:
      return new SpaceError(ErrorCode.VALIDATION_FAILED, `malformed HTTP request (${err.code ?? err.message})`);
  }
}

/** Answers with a JSON error outside any response object (the request never reached a route) and closes. */
function refuse(socket: Duplex | null, e: SpaceError): void {
  if (!socket || socket.destroyed) return;
  socket.on('error', () => undefined);
  if (!socket.writable) return void socket.destroy();
  const body = JSON.stringify(e.toBody());
  socket.end(
    `HTTP/1.1 ${e.status} ${e.code}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

export async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
