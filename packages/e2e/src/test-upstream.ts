import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WebSocketServer } from 'ws';
import { makeTestCertificates } from '@space/server-kit';

export interface RecordedRequest {
  scheme: 'http' | 'https';
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** sha256 of the body's bytes, hex. */
  sha256: string;
  /** When it arrived (Date.now()). */
  at: number;
}

/**
 * A stand-in for the internet on loopback: an HTTPS server with its own test CA (names below
 * `test.space`) and a plain HTTP one. Both record every request and answer `/echo` with what they
 * received (as echo services do, which is what the gateway's response masking is for) and
 * `/bytes?n=N` with N bytes.
 */
export class TestUpstream {
  readonly requests: RecordedRequest[] = [];
  readonly dir = mkdtempSync(path.join(tmpdir(), 'space-upstream-'));
  readonly caFile = path.join(this.dir, 'ca.crt');
  private servers: Server[] = [];
  httpsPort = 0;
  httpPort = 0;

  /** `listenHost`: 127.0.0.1 for tests; the benchmark listens on every address for its direct baseline. */
  constructor(
    readonly names: string[],
    private readonly listenHost = '127.0.0.1',
  ) {}

  async start(): Promise<void> {
    const made = makeTestCertificates(this.dir, this.names, 'SPACE test upstream CA');
    const https = createHttpsServer({ key: readFileSync(made.keyFile), cert: readFileSync(made.certFile) }, (req, res) => this.handle('https', req, res));
    const http = createHttpServer((req, res) => this.handle('http', req, res));
    // WebSocket echo on both: the handshake is recorded like a request, each message comes back.
    const sockets = new WebSocketServer({ noServer: true });
    for (const [scheme, server] of [
      ['https', https],
      ['http', http],
    ] as const) {
      server.on('upgrade', (req, socket, head) => {
        if (this.requests.length < 10_000)
          this.requests.push({ scheme, method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: '', sha256: '', at: Date.now() });
        // `/echo` answers an upgrade request as it would any request (200 and what it received), as
        // servers that do not speak the protocol asked for do.
        if (req.url?.startsWith('/echo')) {
          const body = JSON.stringify({ url: req.url, headers: req.headers });
          return void socket.end(
            `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-echo-authorization: ${req.headers.authorization ?? ''}\r\n\r\n${body}`,
          );
        }
        sockets.handleUpgrade(req, socket, head, (ws) => ws.on('message', (data, binary) => ws.send(data, { binary })));
      });
    }
    for (const server of [https, http]) {
      await new Promise<void>((resolve) => server.listen(0, this.listenHost, resolve));
      this.servers.push(server);
    }
    this.httpsPort = (https.address() as AddressInfo).port;
    this.httpPort = (http.address() as AddressInfo).port;
  }

  /** The platform's settings that send the gateway's requests for these names here, trusting this CA. */
  platformEnv(): Record<string, string> {
    return { SPACE_GATEWAY_TEST_HOSTS: this.gatewayHosts(), SPACE_GATEWAY_TEST_CA_FILE: this.caFile };
  }

  /** The gateway's test-only host map: HTTPS names to the HTTPS port, `plain.*` names to the HTTP one. */
  gatewayHosts(): string {
    return this.names.map((n) => `${n}=127.0.0.1:${n.startsWith('plain.') ? this.httpPort : this.httpsPort}`).join(',');
  }

  last(): RecordedRequest {
    return this.requests.at(-1)!;
  }

  private handle(scheme: 'http' | 'https', req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const bytes = Buffer.concat(chunks);
      const recorded: RecordedRequest = {
        scheme,
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: bytes.toString(),
        sha256: createHash('sha256').update(bytes).digest('hex'),
        at: Date.now(),
      };
      if (this.requests.length < 10_000) this.requests.push(recorded);
      const url = new URL(req.url ?? '/', 'http://upstream');
      if (url.pathname === '/slow') {
        const timer = setTimeout(() => res.end('late'), Number(url.searchParams.get('ms') ?? 0));
        return void res.once('close', () => clearTimeout(timer));
      }
      if (url.pathname === '/bytes') {
        const total = Number(url.searchParams.get('n') ?? 0);
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': total });
        const block = Buffer.alloc(64 * 1024, 'x');
        let sent = 0;
        const pump = (): void => {
          while (sent < total) {
            const piece = block.subarray(0, Math.min(block.length, total - sent));
            sent += piece.length;
            if (!res.write(piece)) return void res.once('drain', pump);
          }
          res.end();
        };
        return pump();
      }
      const body = JSON.stringify(recorded);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  }

  async stop(): Promise<void> {
    for (const server of this.servers) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
