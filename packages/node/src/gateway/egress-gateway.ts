import { Agent as HttpAgent, createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, createServer as createHttpsServer } from 'node:https';
import { isIP, type AddressInfo, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { SpaceError, type EgressAuditEntry, type SessionEgressConfig } from '@space/protocol';
import type { Logger } from '../logger.js';
import type { AuditLog } from './audit-log.js';
import type { EgressRules } from './egress-rules.js';
import { hostMatches } from './egress-rules.js';
import type { GatewayCa } from './gateway-ca.js';
import { SecretRewriter } from './secret-rewriter.js';
import { refusal, refuseRaw, type Admission, type Rewriters } from './admission.js';
import { forwardRequest, withoutHopByHop } from './request-forward.js';
import { relayUpgrade } from './upgrade-relay.js';
import { GatewayConnections } from './gateway-connections.js';
import { namedElsewhere, parseHost } from './request-host.js';

/** Test-only: host names the gateway sends to a fixed address and port, and a CA it also trusts. */
export interface GatewayTestSettings {
  hosts: Map<string, { address: string; port: number }>;
  caPem: string | null;
}

export interface SandboxSource {
  sandboxId: string;
  sessionId: string;
}

export interface EgressGatewayDeps {
  ca: GatewayCa;
  rules: EgressRules;
  audit: AuditLog;
  /** The sandbox a connection comes from, by its source address; null for anything else. */
  sourceOf: (ip: string) => SandboxSource | null;
  test: GatewayTestSettings;
  /** Told of every exchange with its bytes as it ends (usage metering). */
  metered: (sessionId: string, entry: EgressAuditEntry) => void;
  log: Logger;
}

/** Requests one sandbox may have in flight through the gateway. */
const maxRequestsPerSandbox = 256;

/**
 * The node's egress gateway: every HTTP (port 80) and HTTPS (port 443) connection a sandbox opens is
 * redirected here by the host firewall. It terminates TLS with a certificate from the cluster CA,
 * applies the session's egress policy, swaps secret placeholders for values on requests to the
 * secrets' hosts, replaces values echoed in responses by their placeholders, forwards to the real
 * host (certificates verified), and writes an audit entry per request.
 */
export class EgressGateway {
  private readonly configs = new Map<string, SessionEgressConfig>();
  private readonly inFlight = new Map<string, number>();
  private readonly httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 256 });
  private readonly httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 256 });
  private servers: Server[] = [];
  private readonly connections: GatewayConnections;
  /** Requests answered since start, by decision: for the node's health and the platform's /metrics. */
  private readonly counts: Record<EgressAuditEntry['decision'], number> = { allowed: 0, denied: 0, failed: 0 };
  /** The node is cut off from every control plane (`NodeFence`): nothing goes out for any sandbox. */
  private fenced = false;
  httpPort = 0;
  httpsPort = 0;

  constructor(private readonly deps: EgressGatewayDeps) {
    this.connections = new GatewayConnections(deps.sourceOf);
  }

  /** While fenced every request is refused, and the connections open when it begins are cut. */
  setFenced(fenced: boolean): void {
    this.fenced = fenced;
    if (fenced) this.connections.closeAll();
  }

  /** Sets (or replaces) a session's policy and secrets; takes effect on the next request. */
  configure(sessionId: string, config: SessionEgressConfig): void {
    this.configs.set(sessionId, config);
  }

  /**
   * Why the node may not pull images from `host`, or null: pulls run on the node, outside any
   * sandbox, so they follow the rules of sandbox egress with an allow-all policy (never loopback,
   * link-local, this host, private ranges, nor IPv6 unless enabled). Refused before anything
   * connects, so no answer tells open ports from closed ones.
   */
  async registryRefusal(host: string): Promise<string | null> {
    const decision = await this.deps.rules.decide({ mode: 'allow-all', domains: [], cidrs: [] }, host);
    return decision.allowed ? null : decision.reason;
  }

  /** Requests answered since the gateway started, by decision. */
  requestCounts(): Record<EgressAuditEntry['decision'], number> {
    return { ...this.counts };
  }

  /** A deleted session: its settings and its audit log go. */
  async removeSession(sessionId: string): Promise<void> {
    this.configs.delete(sessionId);
    await this.deps.audit.remove(sessionId);
  }

  auditOf(sessionId: string, limit: number): Promise<EgressAuditEntry[]> {
    return this.deps.audit.read(sessionId, limit);
  }

  isConfigured(sessionId: string): boolean {
    return this.configs.has(sessionId);
  }

  async start(host = '0.0.0.0'): Promise<void> {
    const handler = (req: IncomingMessage, res: ServerResponse): void => void this.handle(req, res);
    const http = createHttpServer({ requestTimeout: 0 }, handler);
    const { ca } = this.deps;
    const connections = this.connections;
    const https = createHttpsServer(
      {
        ALPNProtocols: ['http/1.1'],
        // Node calls this with the TLS socket as `this`; under it, the sandbox's TCP connection.
        SNICallback(this: TLSSocket, servername, callback) {
          const name = parseHost(servername);
          if (!name || isIP(name)) return callback(new Error(`bad SNI name ${JSON.stringify(servername)}`));
          const tcp = (this as TLSSocket & { _parent?: Socket })._parent;
          const context = ca.hasContext(name) || !tcp ? ca.contextFor(name) : connections.issueFor(tcp, name, () => ca.contextFor(name));
          context.then(
            (c) => callback(null, c),
            (err: Error) => callback(err),
          );
        },
      },
      handler,
    );
    // A connection the sandbox closes first is answered with a reset, not a FIN: its side then never
    // sits in TIME_WAIT, an endpoint state runsc cannot save (a full checkpoint would fail for a minute).
    // Prepended: the socket's own 'end' handling would half-close first, after which no reset is possible.
    http.on('connection', (socket: Socket) => {
      if (this.connections.accept(socket)) socket.prependListener('end', () => socket.resetAndDestroy());
    });
    // 'connection' comes before any TLS work: a connection from anything but a sandbox gets none.
    https.on('connection', (socket: Socket) => this.connections.accept(socket));
    https.on('secureConnection', (socket: TLSSocket) => {
      // The TCP socket under the TLS one: only it can be reset.
      const tcp = (socket as TLSSocket & { _parent?: Socket })._parent;
      socket.prependListener('end', () => {
        tcp?.resetAndDestroy();
        socket.destroy();
      });
    });
    for (const server of [http, https]) {
      server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => void this.upgrade(req, socket, head));
      server.on('clientError', (_err, socket) => socket.destroy());
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, host, () => resolve());
      });
      this.servers.push(server);
    }
    this.httpPort = (http.address() as AddressInfo).port;
    this.httpsPort = (https.address() as AddressInfo).port;
  }

  /** Resets the sandbox's connections, and its new ones until the returned function is called (around a full checkpoint). */
  cutSandbox(sandboxId: string): () => void {
    return this.connections.cutSandbox(sandboxId);
  }

  /** A sandbox that is gone: its connections through the gateway go too. */
  closeSandbox(sandboxId: string): void {
    this.connections.closeSandbox(sandboxId);
  }

  /** Closes every connection (upgraded ones too, which the servers no longer track) and the servers. */
  async stop(): Promise<void> {
    this.connections.closeAll();
    for (const server of this.servers) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    this.servers = [];
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  /**
   * Checks a request from a sandbox: its source, host, the session's settings, the in-flight bound
   * and the egress policy. Refusals are answered through `refuse` and audited; null then.
   * `onClose` registers the release of the in-flight slot.
   */
  private async admit(
    req: IncomingMessage,
    refuse: (status: number, message: string, code?: string) => void,
    onClose: (release: () => void) => void,
  ): Promise<Admission | null> {
    const started = performance.now();
    const tls = (req.socket as TLSSocket).encrypted === true;
    const remote = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const source = this.deps.sourceOf(remote);
    if (!source) {
      refuse(403, 'connections are accepted from sandboxes only');
      return null;
    }
    const host = parseHost(tls ? (req.socket as TLSSocket).servername || undefined : req.headers.host);
    const entry: EgressAuditEntry = {
      time: new Date().toISOString(),
      sandboxId: source.sandboxId,
      scheme: tls ? 'https' : 'http',
      host: host ?? String(req.headers.host ?? '').slice(0, 253),
      method: req.method ?? 'GET',
      path: (req.url ?? '/').slice(0, 512),
      status: 0,
      decision: 'denied',
      bytesSent: 0,
      bytesReceived: 0,
      durationMs: 0,
      secrets: [],
    };
    const finish = (status: number, decision: EgressAuditEntry['decision'], reason?: string): void => {
      entry.status = status;
      entry.decision = decision;
      entry.durationMs = Math.round((performance.now() - started) * 10) / 10;
      if (reason) entry.reason = reason.slice(0, 512);
      this.counts[decision]++;
      this.deps.metered(source.sessionId, entry);
      this.deps.audit.append(source.sessionId, entry).catch((err: Error) => this.deps.log.warn(`egress audit of ${source.sessionId}: ${err.message}`));
    };
    const deny = (status: number, reason: string, message: string, code?: string): null => {
      finish(status, 'denied', reason);
      refuse(status, message, code);
      return null;
    };
    if (this.fenced) return deny(503, 'node fenced', 'this node is cut off from every control plane: no egress until one hears it again', 'NODE_FENCED');
    if (!host) return deny(400, 'no valid host name (Host header or TLS SNI)', 'the request names no valid host (Host header or TLS SNI)');
    const mismatch = namedElsewhere(req, host, tls);
    if (mismatch) return deny(403, mismatch, `egress denied: ${mismatch}`, 'EGRESS_DENIED');
    const config = this.configs.get(source.sessionId);
    if (!config)
      return deny(503, 'egress settings not loaded', 'egress settings for this session are not loaded yet (the node agent restarted); retry in a few seconds');
    const active = this.inFlight.get(source.sandboxId) ?? 0;
    if (active >= maxRequestsPerSandbox)
      return deny(429, 'too many requests in flight', `at most ${maxRequestsPerSandbox} requests may be in flight through the gateway per sandbox`);
    this.inFlight.set(source.sandboxId, active + 1);
    onClose(() => {
      const left = (this.inFlight.get(source.sandboxId) ?? 1) - 1;
      if (left > 0) this.inFlight.set(source.sandboxId, left);
      else this.inFlight.delete(source.sandboxId);
    });
    const pinned = this.deps.test.hosts.get(host);
    const decision = await this.deps.rules.decide(config.policy, host, pinned?.address);
    if (!decision.allowed) return deny(403, decision.reason, `egress to ${host} denied: ${decision.reason}`, 'EGRESS_DENIED');
    return { tls, host, address: decision.address, port: pinned?.port ?? (tls ? 443 : 80), config, entry, finish };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = await this.admit(
      req,
      (status, message, code) => this.refuse(res, status, message, code),
      (release) => res.once('close', release),
    );
    if (!target) return;
    try {
      const agent = target.tls ? this.httpsAgent : this.httpAgent;
      await forwardRequest(req, res, target, this.rewriters(target.config, target.host), { agent, ca: this.testCaFor(target.host) });
      target.finish(res.statusCode, 'allowed');
    } catch (err) {
      const message = err instanceof SpaceError ? err.message : `upstream ${target.host}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
      target.finish(res.headersSent ? res.statusCode : 502, 'failed', message);
      if (res.headersSent) res.destroy();
      else this.refuse(res, err instanceof SpaceError ? err.status : 502, message, 'UPSTREAM_FAILED');
    }
  }

  /** A protocol upgrade (WebSocket): admitted like a request, then relayed. */
  private async upgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => undefined);
    const target = await this.admit(
      req,
      (status, message, code) => refuseRaw(socket, status, message, code),
      (release) => socket.once('close', release),
    );
    if (!target) return;
    relayUpgrade(req, socket, head, target, this.rewriters(target.config, target.host), withoutHopByHop(req.headers), this.testCaFor(target.host));
  }

  /**
   * Placeholders become values only on requests to the secret's own hosts (outbound); every value
   * the session holds is masked in every answer, whichever host echoes it (inbound).
   */
  private rewriters(config: SessionEgressConfig, host: string): Rewriters {
    return {
      outbound: new SecretRewriter(
        config.secrets.filter((s) => s.hosts.some((pattern) => hostMatches(pattern, host))).map((s) => ({ name: s.name, from: s.placeholder, to: s.value })),
      ),
      inbound: new SecretRewriter(config.secrets.map((s) => ({ name: s.name, from: s.value, to: s.placeholder }))),
    };
  }

  /** The test-only CA, for test-only hosts. */
  private testCaFor(host: string): string | undefined {
    return this.deps.test.caPem && this.deps.test.hosts.has(host) ? this.deps.test.caPem : undefined;
  }

  private refuse(res: ServerResponse, status: number, message: string, code?: string): void {
    if (res.headersSent) return void res.destroy();
    const { headers, body } = refusal(status, message, code);
    res.writeHead(status, headers);
    res.end(body);
  }
}
