import { type Agent, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse, request } from 'node:http';
import { request as tlsRequest } from 'node:https';
import { connect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Duplex } from 'node:stream';
import { type ClientTls, clientTlsOptions } from './peer-tls.js';
import { ErrorCode, SpaceError } from '@space/protocol';

/** Where a proxied request goes. */
export interface ProxyTarget {
  host: string;
  port: number;
  /** Path and query on the target. */
  path: string;
  /** Headers set on the request (after the client's, which they replace). */
  headers?: Record<string, string>;
  /** Client headers not passed on (beyond the hop-by-hop ones), lowercase. */
  drop?: string[];
  /** The keep-alive pool requests go through (Node's global one by default). */
  agent?: Agent;
  /** Over TLS: the target's certificate signed by `ca` (PEM), else by one of the system's CAs; `identity` presented when the target asks. */
  tls?: ClientTls;
}

/** Headers that belong to one connection, never passed on (RFC 9110 7.6.1), and those a `Connection` header names. */
const hopByHop = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

function passedOn(headers: IncomingHttpHeaders, drop: string[] = []): Record<string, string | string[]> {
  const named = String(headers.connection ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase());
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || hopByHop.includes(name) || named.includes(name) || drop.includes(name)) continue;
    out[name] = value;
  }
  return out;
}

/** Headers added to every answer, next to the target's own of the same name (two CSPs both apply). */
function withAdded(headers: Record<string, string | string[]>, added: Record<string, string>): Record<string, string | string[]> {
  const out = { ...headers };
  for (const [name, value] of Object.entries(added)) {
    const own = out[name];
    out[name] = own === undefined ? value : [...(Array.isArray(own) ? own : [own]), value];
  }
  return out;
}

/**
 * Sends `req` to `target` and its answer back on `res`, both bodies streamed (backpressure through
 * `pipe`, so buffers stay bounded), hop-by-hop headers dropped both ways. A target that cannot be
 * reached rejects before anything is sent to the client (`unreachable` names the code).
 * `answerHeaders` are added to the answer, whatever the target answers.
 */
export function proxyRequest(
  req: IncomingMessage,
  res: ServerResponse,
  target: ProxyTarget,
  unreachable: string = ErrorCode.SANDBOX_UNAVAILABLE,
  answerHeaders: Record<string, string> = {},
): Promise<void> {
  return new Promise((resolve, reject) => {
    const upstream = (target.tls ? tlsRequest : request)(
      {
        host: target.host,
        port: target.port,
        ...clientTlsOptions(target.tls),
        method: req.method,
        path: target.path,
        headers: { ...passedOn(req.headers, target.drop), ...target.headers },
        ...(target.agent ? { agent: target.agent } : {}),
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, withAdded(passedOn(answer.headers), answerHeaders));
        answer.pipe(res);
        answer.on('end', () => resolve());
        answer.on('error', () => res.destroy());
      },
    );
    upstream.on('error', (err) => {
      if (res.headersSent) return res.destroy();
      reject(new SpaceError(unreachable as ErrorCode, `${target.host}:${target.port} did not answer: ${err.message}`));
    });
    // The client went away: so does the request to the target.
    res.once('close', () => upstream.destroy());
    req.pipe(upstream);
  });
}

/**
 * Joins an upgrade request (a WebSocket, any protocol switch) to `target`: the request goes out as
 * it came (hop-by-hop headers but `Connection: Upgrade` and `Upgrade` dropped and set again), and
 * from then on bytes pass both ways until either side closes. Resolves with the connection to the target.
 */
export function proxyUpgrade(req: IncomingMessage, client: Duplex, head: Buffer, target: ProxyTarget): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const upstream: Socket = target.tls
      ? tlsConnect({
          host: target.host,
          port: target.port,
          ...clientTlsOptions(target.tls),
          ...(isIP(target.host) ? {} : { servername: target.host }),
        })
      : connect({ host: target.host, port: target.port });
    upstream.once('error', (err) => reject(new SpaceError(ErrorCode.SANDBOX_UNAVAILABLE, `${target.host}:${target.port} did not answer: ${err.message}`)));
    upstream.once(target.tls ? 'secureConnect' : 'connect', () => {
      const headers = { ...passedOn(req.headers, target.drop), ...target.headers, connection: 'Upgrade', upgrade: String(req.headers.upgrade ?? '') };
      const lines = Object.entries(headers).flatMap(([name, value]) => (Array.isArray(value) ? value : [value]).map((v) => `${name}: ${v}`));
      upstream.write(`${req.method} ${target.path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.removeAllListeners('error');
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      upstream.pipe(client);
      client.pipe(upstream);
      resolve(upstream);
    });
  });
}

/** Waits until something accepts TCP connections on `host:port`, trying every 100 ms for `waitMs`; false if nothing did. */
export async function waitForListener(host: string, port: number, waitMs: number): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const accepted = await new Promise<boolean>((resolve) => {
      const probe = connect({ host, port });
      probe.setTimeout(1000);
      probe.once('connect', () => (probe.destroy(), resolve(true)));
      probe.once('error', () => resolve(false));
      probe.once('timeout', () => (probe.destroy(), resolve(false)));
    });
    if (accepted) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}
