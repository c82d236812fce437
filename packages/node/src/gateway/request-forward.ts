import { type Agent as HttpAgent, type IncomingHttpHeaders, type IncomingMessage, request as httpRequest, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { pipeline, type Readable, Transform } from 'node:stream';
import { ErrorCode, SpaceError } from '@space/protocol';
import { readBounded } from '@space/server-kit';
import type { Admission, Rewriters } from './admission.js';

/** Request bodies up to this size have placeholders replaced (and their length recomputed). */
const maxRewrittenBody = 1024 * 1024;
const hopByHop = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

/** The headers without the hop-by-hop ones, and those the Connection header names. */
export function withoutHopByHop(headers: IncomingHttpHeaders): Record<string, string | string[] | undefined> {
  const out: Record<string, string | string[] | undefined> = { ...headers };
  const listed = String(headers.connection ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase());
  for (const name of [...hopByHop, ...listed]) delete out[name];
  return out;
}

/** Counts the bytes that pass. */
function counter(onBytes: (n: number) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      onBytes(chunk.length);
      callback(null, chunk);
    },
  });
}

/**
 * Sends an admitted request on to its host (certificates verified; `via.ca` a test-only CA) and the
 * answer back: placeholders swapped in the request line, headers and bodies (up to
 * `maxRewrittenBody` with a length, chunked ones as they stream), values masked in the answer.
 */
export async function forwardRequest(
  req: IncomingMessage,
  res: ServerResponse,
  target: Admission,
  { outbound, inbound }: Rewriters,
  via: { agent: HttpAgent; ca: string | undefined },
): Promise<void> {
  const { entry, host } = target;
  const headers = outbound.rewriteHeaders(withoutHopByHop(req.headers));
  const path = outbound.rewrite(req.url ?? '/');
  // An upstream that compresses its answer would hide an echoed value from the response filter.
  if (!outbound.empty || !inbound.empty) headers['accept-encoding'] = 'identity';
  let body: Readable | Buffer = req;
  const length = Number(req.headers['content-length'] ?? NaN);
  if (!outbound.empty && Number.isFinite(length) && length <= maxRewrittenBody) {
    const raw = await readBounded(req, maxRewrittenBody, {
      overflow: () => new SpaceError(ErrorCode.PAYLOAD_TOO_LARGE, 'request body larger than its content-length'),
      interrupted: () => new SpaceError(ErrorCode.REQUEST_ABORTED, 'the sandbox closed the connection before the request body was complete'),
      drain: false,
    });
    body = outbound.rewriteBuffer(raw);
    headers['content-length'] = String(body.length);
  } else if (!outbound.empty && req.headers['transfer-encoding']) {
    body = req.pipe(outbound.stream());
  }
  const send = target.tls ? httpsRequest : httpRequest;
  const upstream = send({
    host: target.address,
    port: target.port,
    method: req.method,
    path,
    headers,
    agent: via.agent,
    ...(target.tls ? { servername: isIP(host) ? undefined : host, ca: via.ca } : {}),
    timeout: 30_000,
  });
  await new Promise<void>((resolve, reject) => {
    upstream.on('timeout', () => upstream.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    upstream.on('error', reject);
    // A sandbox that hangs up before the answer is through: the upstream request goes too, and an
    // answer that comes after is never piped into the closed connection (which throws).
    res.once('close', () => {
      if (!res.writableFinished)
        upstream.destroy(new SpaceError(ErrorCode.REQUEST_ABORTED, 'the sandbox closed the connection before the answer was complete'));
    });
    upstream.on('response', (response) => {
      if (res.destroyed) {
        response.destroy();
        return;
      }
      entry.secrets = [...outbound.used];
      const responseHeaders = inbound.rewriteHeaders(withoutHopByHop(response.headers));
      if (!inbound.empty) delete responseHeaders['content-length'];
      res.writeHead(response.statusCode ?? 502, responseHeaders);
      const received = counter((n) => (entry.bytesReceived += n));
      const done = (err: Error | null): void => (err ? reject(err) : resolve());
      if (inbound.empty) pipeline(response, received, res, done);
      else pipeline(response, received, inbound.stream(), res, done);
    });
    if (Buffer.isBuffer(body)) {
      entry.bytesSent = body.length;
      upstream.end(body);
    } else
      pipeline(
        body,
        counter((n) => (entry.bytesSent += n)),
        upstream,
        (err) => err && reject(err),
      );
  });
}
