// One simulated node agent for the scale harness (bench/scale.mjs): it serves the real node API
// (protocol's nodeRoutes and the relayed sandbox operations, bodies checked against their schemas)
// on its own loopback port, with no sandbox behind it. Sandboxes, volumes and checkpoints are
// records; each answer comes after a sampled latency, so what the harness measures is the control
// plane's own cost. A node may misbehave as real ones do: slow, wrong answers, cut connections.
import { createServer } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { ErrorCode, SpaceError, findRoute, nodeRoutes, nodeSandboxPrefix, sandboxRoutes } from '../../packages/protocol/dist/index.js';

/** Node routes by name, and the sandbox operations under the node's sandbox prefix, for one lookup. */
const routes = [
  ...Object.entries(nodeRoutes).map(([name, route]) => ({ ...route, name })),
  ...sandboxRoutes.map((route) => ({
    ...route,
    name: `sandbox ${route.method} ${route.path}`,
    path: `${nodeSandboxPrefix}${route.path}`,
    sandboxRoute: route,
  })),
];

/** How each kind of node misbehaves, per answer. */
export const behaviors = {
  good: { extraMs: 0, wrongShare: 0, cutShare: 0 },
  /** Answers everything 300 ms late. */
  slow: { extraMs: 300, wrongShare: 0, cutShare: 0 },
  /** One answer in 10 does not match its schema. */
  wrong: { extraMs: 0, wrongShare: 0.1, cutShare: 0 },
  /** One connection in 20 is cut before the answer. */
  flaky: { extraMs: 0, wrongShare: 0, cutShare: 0.05 },
};

const now = () => new Date().toISOString();
const objectKey = (kind, id) => `${kind}/${createHash('sha256').update(id).digest('hex').slice(0, 2)}/${id}.send`;

export class SimulatedNode {
  /** Running sandboxes by id. */
  sandboxes = new Map();
  /** Sessions whose volume is here, with whether it was written since its last checkpoint. */
  volumes = new Map();
  /** Checkpoints held here, by id. */
  checkpoints = new Map();
  url = '';
  lost = false;
  /** Frozen: requests are taken and never answered. */
  frozen = false;
  /** Requests served, by route name (`volumeChanged`, `sandbox POST /exec`, …). */
  served = new Map();
  /** Usage batches no control plane acknowledged yet, as a node's ledger holds them. */
  usage = [];
  /** The tenant each session's start named, for its usage entries. */
  tenantOf = new Map();
  ledger = `led_${randomBytes(8).toString('hex')}`;
  seq = 0;
  meter = null;

  /**
   * @param {{ id: string, token: string, latencyMs: () => number, behavior: keyof typeof behaviors, objects: Map<string, number>, quietLists: boolean }} options
   *   `objects`: the object store the simulated nodes share (key -> bytes), so a checkpoint shipped by one is fetched by another.
   *   `quietLists`: whether its sandbox list says which sandboxes are quiet since their newest checkpoint (real nodes do).
   */
  constructor(options) {
    this.options = options;
    this.id = options.id;
    this.token = options.token;
    this.behavior = behaviors[options.behavior];
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 60_000;
  }

  async listen() {
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
  }

  /**
   * Closes a usage batch every `sampleMs` (from a random phase, as nodes started at different times
   * do) with an entry for each running sandbox, as a real node's meter does; its heartbeats say how
   * many it holds, and control planes collect them.
   */
  startMetering(sampleMs) {
    const close = () => {
      if (this.sandboxes.size === 0 || this.usage.length >= 240) return;
      const end = Date.now();
      const entries = [...this.sandboxes.values()].map((s) => ({
        sessionId: s.sessionId,
        tenantId: this.tenantOf.get(s.sessionId) ?? null,
        cpuMicros: Math.round(Math.random() * 1_000_000),
        memoryKibSeconds: 65_536 * (sampleMs / 1000),
        diskKibSeconds: 1024 * (sampleMs / 1000),
        egressBytesOut: 0,
        egressBytesIn: 0,
        egressRequests: 0,
        sandboxMs: sampleMs,
      }));
      this.usage.push({ ledger: this.ledger, seq: ++this.seq, start: new Date(end - sampleMs).toISOString(), end: new Date(end).toISOString(), entries });
    };
    this.meter = setTimeout(() => {
      close();
      this.meter = setInterval(close, sampleMs);
    }, Math.random() * sampleMs);
  }

  /** The node is lost: its port closes and every connection is cut (it also stops heartbeating and metering). */
  async lose() {
    this.fallSilent();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  /**
   * The node freezes (a stopped process, a hung event loop): it stops heartbeating and metering, and
   * its port still accepts connections and requests but answers none, those it was already serving
   * included, until `lose` closes it.
   */
  freeze() {
    this.fallSilent();
    this.frozen = true;
  }

  /** No heartbeat (the simulator skips a lost node's) and no metering from now on. */
  fallSilent() {
    this.lost = true;
    clearTimeout(this.meter);
    clearInterval(this.meter);
  }

  /** Its sandbox of the session dies without the control plane being told. */
  kill(sessionId) {
    for (const [id, info] of this.sandboxes) if (info.sessionId === sessionId) this.sandboxes.delete(id);
  }

  heartbeat(joining) {
    return {
      id: this.id,
      url: this.url,
      token: this.token,
      capacity: { memoryMb: 65_536, cpus: 16 },
      sandboxes: this.sandboxes.size,
      ...(joining ? { sessions: [...new Set([...this.sandboxes.values()].map((s) => s.sessionId))] } : {}),
      ...(this.usage.length > 0 ? { usageBatches: this.usage.length } : {}),
    };
  }

  async handle(req, res) {
    const reply = (status, body) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    try {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      if (req.headers.authorization !== `Bearer ${this.token}`) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'wrong node token');
      const url = new URL(req.url, 'http://node');
      const match = findRoute(routes, req.method, url.pathname);
      if (!match || 'methodMismatch' in match) throw new SpaceError(ErrorCode.ROUTE_NOT_FOUND, `${req.method} ${url.pathname} is not a node route`);
      const { route, params } = match;
      this.served.set(route.name, (this.served.get(route.name) ?? 0) + 1);
      const query = Object.fromEntries(url.searchParams);
      const text = Buffer.concat(chunks).toString('utf8');
      const body = route.body ? route.body.parse(text ? JSON.parse(text) : {}) : undefined;
      if (route.query) route.query.parse(query);
      await new Promise((resolve) => setTimeout(resolve, this.options.latencyMs() + this.behavior.extraMs));
      if (this.frozen) return;
      if (Math.random() < this.behavior.cutShare) return req.socket.destroy();
      const [status, answer] = route.sandboxRoute ? this.sandboxCall(route.sandboxRoute, params, body) : this.nodeCall(route, params, body);
      if (Math.random() < this.behavior.wrongShare) return reply(status, { unexpected: 'shape', ...answer, extra: true });
      // What a real node would answer must be what the control plane expects: checked here too.
      reply(status, route.response ? route.response.parse(answer) : answer);
    } catch (err) {
      const failure = err instanceof SpaceError ? err : new SpaceError(ErrorCode.VALIDATION_FAILED, `simulated node ${this.id}: ${err.message}`);
      reply(failure.status, failure.toBody());
    }
  }

  sandboxCall(route, { sandboxId }, body) {
    const sandbox = this.sandboxes.get(sandboxId);
    if (!sandbox) throw new SpaceError(ErrorCode.SANDBOX_NOT_FOUND, `sandbox ${sandboxId} is not running on ${this.id}`);
    const volume = this.volumes.get(sandbox.sessionId);
    // As a real node: anything but a read comes in and may write, so the sandbox is no longer quiet.
    if (route.method !== 'GET' || route.kind === 'websocket') sandbox.quietSince = null;
    switch (`${route.method} ${route.path}`) {
      case 'POST /exec':
        if (volume) volume.changed = true;
        return [200, body.background ? { pid: 100 } : { exitCode: 0, stdout: 'ok\n', stderr: '', durationMs: 1 }];
      case 'GET /files/stat':
        return [200, { name: 'x', path: '/home/user/x', type: 'file', size: 3, mode: 0o644, mtime: now() }];
      case 'GET /files/list':
        return [200, { path: '/home/user', entries: [], truncated: false }];
      case 'GET /processes':
        return [200, { processes: [] }];
      default:
        throw new SpaceError(ErrorCode.ROUTE_NOT_FOUND, `simulated nodes do not serve ${route.method} ${route.path}`);
    }
  }

  nodeCall(route, params, body) {
    switch (route.name) {
      case 'health':
        return [200, this.health()];
      case 'usageBatches':
        return [200, { batches: this.usage.slice(0, 100) }];
      case 'ackUsage':
        this.usage = this.usage.filter((b) => b.ledger !== body.ledger || b.seq > body.through);
        return [200, { ok: true }];
      case 'listSandboxes':
        return [200, { sandboxes: [...this.sandboxes.values()] }];
      case 'startSandbox':
        return [201, this.start(body)];
      case 'sandboxInfo': {
        const info = this.sandboxes.get(params.sandboxId);
        if (!info) throw new SpaceError(ErrorCode.SANDBOX_NOT_FOUND, `sandbox ${params.sandboxId} is not running on ${this.id}`);
        return [200, info];
      }
      case 'stopSandbox':
        this.sandboxes.delete(params.sandboxId);
        return [200, { ok: true }];
      case 'deleteVolume':
        this.kill(params.sessionId);
        this.volumes.delete(params.sessionId);
        return [200, { ok: true }];
      case 'checkpoint':
        return [201, this.checkpoint(params.sessionId, body)];
      case 'volumeChanged':
        return [200, { changed: this.volumes.get(params.sessionId)?.changed ?? false }];
      case 'restoreVolume':
        if (!this.checkpoints.has(body.checkpointId))
          throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${body.checkpointId} is not on ${this.id}`);
        this.kill(params.sessionId);
        return [200, { ok: true }];
      case 'configureEgress':
        return [200, { ok: true }];
      case 'listCheckpoints':
        return [200, { checkpoints: [...this.checkpoints].map(([id, c]) => ({ id, createdAt: c.createdAt })) }];
      case 'deleteCheckpoint':
        this.checkpoints.delete(params.checkpointId);
        return [200, { ok: true }];
      case 'deleteBases':
        return [200, { ok: true }];
      case 'createBase':
        return [201, { id: body.baseId, object: this.store(objectKey('bases', body.baseId), body.dataKey) }];
      case 'shipCheckpoint':
        if (!this.checkpoints.has(params.checkpointId))
          throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${params.checkpointId} is not on ${this.id}`);
        return [200, { objects: [this.store(objectKey('checkpoints', params.checkpointId), body.dataKey)] }];
      case 'fetchCheckpoint':
        for (const { key } of [body.base.object, ...body.objects])
          if (!this.options.objects.has(key)) throw new SpaceError(ErrorCode.OBJECT_NOT_FOUND, `object ${key} is not in the object store`);
        this.checkpoints.set(params.checkpointId, { createdAt: now() });
        return [200, { ok: true }];
      case 'deleteObjects':
        for (const key of body.keys) this.options.objects.delete(key);
        return [200, { ok: true }];
      default:
        throw new SpaceError(ErrorCode.ROUTE_NOT_FOUND, `simulated nodes do not serve ${route.name}`);
    }
  }

  health() {
    return {
      nodeId: this.id,
      templates: [],
      sandboxes: this.sandboxes.size,
      pool: {},
      templateImages: [],
      starts: {},
      egressUnconfigured: [],
      usageBatches: this.usage.length,
      capacity: { memoryMb: 65_536, cpus: 16 },
      gatewayRequests: {},
      storage: { status: 'ok', hostFreeBytes: null },
    };
  }

  start(request) {
    const info = {
      sandboxId: `sbx_${randomBytes(8).toString('hex')}`,
      sessionId: request.sessionId,
      nodeId: this.id,
      template: request.template,
      startedAt: now(),
      running: true,
      restoredFrom: null,
      note: null,
      quietSince: null,
    };
    this.kill(request.sessionId);
    this.sandboxes.set(info.sandboxId, info);
    this.tenantOf.set(request.sessionId, request.tenantId ?? null);
    if (!this.volumes.has(request.sessionId)) this.volumes.set(request.sessionId, { changed: true });
    return info;
  }

  checkpoint(sessionId, { checkpointId, kind }) {
    const volume = this.volumes.get(sessionId);
    if (!volume) throw new SpaceError(ErrorCode.SESSION_NOT_FOUND, `no volume of ${sessionId} on ${this.id}`);
    volume.changed = false;
    // No process runs in a simulated sandbox: an fs checkpoint leaves it quiet, as a real node says in its list.
    const quiet = this.options.quietLists && kind === 'fs' ? checkpointId : null;
    for (const sandbox of this.sandboxes.values()) if (sandbox.sessionId === sessionId) sandbox.quietSince = quiet;
    const createdAt = now();
    this.checkpoints.set(checkpointId, { createdAt, sessionId });
    return { checkpointId, kind, createdAt, sizeBytes: 4096, pauseMs: kind === 'full' ? 5 : null };
  }

  /** An object the node stores: its key in the shared store, with the size and hash it must read back as. */
  store(key, dataKey) {
    const bytes = 4096;
    this.options.objects.set(key, bytes);
    return { key, bytes, sha256: createHash('sha256').update(key).digest('hex'), dataKeyId: dataKey.id };
  }
}
