// The API fuzzer (a test harness): request generation, mutation and the invariants checked after each, read as one.
import { ClientStreamMessageSchema, ExecStreamStartSchema, PtyStartSchema, publicRoutes, type PublicRoute } from '@space/protocol';
import { malformedFrames, sendRawFrame, sendRawRequest } from '@space/server-kit/testing';
import { WebSocket } from 'ws';
import { Random } from './random.js';
import { sample } from './schema-sampler.js';
import { e2bCall } from './e2b-fuzz.js';
import { dockerfileCall } from './dockerfile-fuzz.js';
import type { z } from 'zod';
import type { Attempt, FuzzTarget } from './fuzz-types.js';

export interface FuzzOptions {
  requests: number;
  seed: number;
  /** Requests in flight at once. */
  concurrency?: number;
  /** A request unanswered this long counts as hung. */
  timeoutMs?: number;
}

type Kind = 'api' | 'e2b' | 'dockerfile' | 'raw-http' | 'websocket';

export interface FuzzFinding {
  kind: Kind;
  /** What was sent, short enough to read and replay. */
  request: string;
  status: number;
  reply: string;
}

export interface FuzzReport {
  seed: number;
  requests: number;
  durationMs: number;
  byKind: Record<Kind, number>;
  /** Answers by status (0: the connection closed without an HTTP answer, as for garbage). */
  byStatus: Record<string, number>;
  /** Answers ≥ 500: each is a defect. */
  serverErrors: FuzzFinding[];
  /** Requests unanswered within the timeout: each is a defect too. */
  hung: FuzzFinding[];
  /**
   * The longest a `/healthz` asked every 50 ms during the run waited, and its median: what any
   * other tenant's call waited behind the run's; `worstDuring`: the requests in flight then.
   */
  health: { worstMs: number; medianMs: number; probes: number; worstDuring: string[] };
}

const methods = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'];
const garbageIds = ['', 'x', 'ses_', 'ses_../../etc', '%2e%2e%2f', '%00', `ses_${'a'.repeat(300)}`, '\u00ff', '-1', 'ckp_0000000000', '*'];
const streamRoutes = publicRoutes.filter((r) => r.transport === 'websocket');
const requestRoutes = publicRoutes.filter((r) => r.transport !== 'websocket');
/**
 * How often a route names the target's real ids: the session's deletion never (the run needs it),
 * nor its timeout (one of a few seconds deletes it while the run goes on, as E2B's does in
 * e2b-fuzz.ts), what resets its sandbox sometimes (each is slow), everything else mostly.
 */
function realIdChance(route: PublicRoute): number {
  const operation = `${route.method} ${route.path}`;
  if (operation === 'DELETE /v1/sessions/:sessionId' || operation === 'POST /v1/sessions/:sessionId/timeout') return 0;
  if (operation === 'POST /v1/sessions/:sessionId/sandbox/kill' || operation === 'POST /v1/sessions/:sessionId/restore') return 0.15;
  return 0.85;
}

/**
 * Sends `requests` hostile requests to a platform: API calls shaped after the protocol's zod
 * schemas and mutated (wrong types, out-of-range values, missing and unknown keys, nasty strings,
 * wrong methods, bad keys, huge or broken bodies), the same against the E2B API (`e2b-fuzz.ts`),
 * adversarial Dockerfiles and COPY globs (`dockerfile-fuzz.ts`), raw HTTP garbage, and WebSocket
 * streams opened with malformed frames or mutated messages. Reports every answer ≥ 500, every hang
 * and how long a `/healthz` asked meanwhile waited. Seeded: the same seed sends the same requests.
 */
export async function fuzzApi(target: FuzzTarget, options: FuzzOptions): Promise<FuzzReport> {
  const rng = new Random(options.seed);
  const timeoutMs = options.timeoutMs ?? 20_000;
  const report: FuzzReport = {
    seed: options.seed,
    requests: 0,
    durationMs: 0,
    byKind: { api: 0, e2b: 0, dockerfile: 0, 'raw-http': 0, websocket: 0 },
    byStatus: {},
    serverErrors: [],
    hung: [],
    health: { worstMs: 0, medianMs: 0, probes: 0, worstDuring: [] },
  };
  const sent: { from: number; to: number; description: string }[] = [];
  const started = performance.now();
  let running = true;
  const healthProbe = probeHealth(target.url, () => running);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < options.requests) {
      next++;
      const roll = rng.next();
      const kind: Kind = roll < 0.6 ? 'api' : roll < 0.72 ? 'e2b' : roll < 0.77 ? 'dockerfile' : roll < 0.88 ? 'raw-http' : 'websocket';
      const attempts: Record<Kind, () => Attempt> = {
        api: () => apiCall(target, rng),
        e2b: () => e2bCall(target, rng),
        dockerfile: () => dockerfileCall(target, rng),
        'raw-http': () => rawHttp(target, rng),
        websocket: () => stream(target, rng),
      };
      const attempt = attempts[kind]();
      const from = performance.now();
      const finding = await withTimeout(attempt.run(), timeoutMs);
      sent.push({ from, to: performance.now(), description: attempt.description.slice(0, 200) });
      report.requests++;
      report.byKind[kind]++;
      if (finding === null) {
        report.hung.push({ kind, request: attempt.description, status: 0, reply: '' });
        continue;
      }
      report.byStatus[finding.status] = (report.byStatus[finding.status] ?? 0) + 1;
      if (finding.status >= 500) report.serverErrors.push({ kind, request: attempt.description, ...finding });
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
  running = false;
  const { waits, worst } = await healthProbe;
  report.health = { ...waits, worstDuring: worst ? sent.filter((r) => r.from < worst.to && r.to > worst.from).map((r) => r.description) : [] };
  report.durationMs = Math.round(performance.now() - started);
  return report;
}

/** Asks `/healthz` every 50 ms while `running()`: how long the answers took, and when the slowest was asked. */
async function probeHealth(
  url: string,
  running: () => boolean,
): Promise<{ waits: Omit<FuzzReport['health'], 'worstDuring'>; worst: { from: number; to: number } | null }> {
  const waits: number[] = [];
  let worst: { from: number; to: number } | null = null;
  while (running()) {
    const from = performance.now();
    await fetch(`${url}/healthz`).then(
      (res) => res.arrayBuffer(),
      () => undefined,
    );
    const to = performance.now();
    waits.push(to - from);
    if (!worst || to - from > worst.to - worst.from) worst = { from, to };
    await new Promise((r) => setTimeout(r, 50));
  }
  const sorted = [...waits].sort((a, b) => a - b);
  const round = (ms: number) => Math.round(ms * 10) / 10;
  return { waits: { worstMs: round(sorted.at(-1) ?? 0), medianMs: round(sorted[Math.floor(sorted.length / 2)] ?? 0), probes: sorted.length }, worst };
}

async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The route's path with its parameters filled: mostly the target's real ids, sometimes garbage. */
function fillPath(route: PublicRoute, target: FuzzTarget, rng: Random): string {
  const realChance = realIdChance(route);
  const values: Record<string, () => string> = {
    sessionId: () => target.sessionId,
    checkpointId: () => target.checkpointId,
    // `:name` is a secret's, a template's, a service's or a volume's: the volume routes get the volume.
    name: () => (route.path.startsWith('/v1/volumes') ? target.volumeName : target.secretName),
    snapshotId: () => target.volumeSnapshotId,
    pid: () => String(rng.chance(0.5) ? target.pid : rng.int(-1, 70000)),
  };
  return route.path.replace(/:([a-zA-Z]+)/g, (_, name: string) =>
    encodeURIComponent(rng.chance(realChance) ? (values[name]?.() ?? 'x') : rng.pick(garbageIds)),
  );
}

function queryOf(schema: z.ZodTypeAny | undefined, rng: Random): string {
  if (!schema || rng.chance(0.1)) return rng.chance(0.1) ? `?${rng.pick(['%', '%zz', 'a=1&a=2', '=', '&&&', `path=${'a'.repeat(9000)}`])}` : '';
  const value = sample(schema, rng);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `?q=${encodeURIComponent(JSON.stringify(value) ?? '')}`;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(value)) if (v !== undefined) params.append(k, typeof v === 'string' ? v : JSON.stringify(v));
  const text = params.toString();
  return text ? `?${text}` : '';
}

function keyFor(target: FuzzTarget, rng: Random): string | null {
  const roll = rng.next();
  if (roll < 0.85) return target.key;
  if (roll < 0.9) return target.adminKey;
  if (roll < 0.95) return null;
  return rng.pick(['sk_wrong', '', 'a'.repeat(5000), 'sk_\u0000']);
}

function apiCall(target: FuzzTarget, rng: Random): Attempt {
  const route = rng.pick(requestRoutes);
  let method = rng.chance(0.92) ? route.method : rng.pick(methods);
  // A wrong method on a session's path must not delete the session the run needs.
  if (method === 'DELETE' && route.method !== 'DELETE' && route.path === '/v1/sessions/:sessionId') method = route.method;
  const path = fillPath(route, target, rng) + queryOf(route.query, rng);
  const headers: Record<string, string> = {};
  const key = keyFor(target, rng);
  if (key !== null) headers.authorization = `Bearer ${key}`;
  let body: string | Buffer | undefined;
  if (route.transport === 'binary' && method === 'PUT') {
    body = rng.bytes(rng.int(0, 65536));
  } else if (route.body || rng.chance(0.1)) {
    const roll = rng.next();
    if (roll < 0.8) body = JSON.stringify(route.body ? sample(route.body, rng) : {}) ?? '';
    else if (roll < 0.9) body = rng.pick(['{', '{"a":', 'null', '[]', '"str"', '\u0000', '{"__proto__":{"admin":true}}', 'x'.repeat(10_000)]);
    else body = Buffer.alloc(rng.int(1, 3) * 1024 * 1024, 0x7b);
    headers['content-type'] = rng.chance(0.9) ? 'application/json' : rng.pick(['text/plain', 'application/x-www-form-urlencoded', '']);
  }
  const hasBody = body !== undefined && method !== 'GET' && method !== 'HEAD';
  return {
    description: `${method} ${path.slice(0, 300)}${hasBody ? ` body ${String(body).slice(0, 200)}` : ''}`,
    run: async () => {
      const res = await fetch(target.url + path, {
        method,
        headers,
        ...(hasBody ? { body: typeof body === 'string' ? body : new Uint8Array(body!) } : {}),
      }).catch(() => null);
      if (!res) return { status: 0, reply: '' };
      // A stream that goes on (the event stream, a followed build log) has answered once its headers came.
      if (res.ok && /^text\/(event-stream|plain)/.test(res.headers.get('content-type') ?? '')) {
        await res.body?.cancel().catch(() => undefined);
        return { status: res.status, reply: '' };
      }
      return { status: res.status, reply: (await res.text().catch(() => '')).slice(0, 500) };
    },
  };
}

/** Requests no HTTP client sends: broken request lines, headers and framing. */
function rawHttp(target: FuzzTarget, rng: Random): Attempt {
  const { hostname: host, port } = new URL(target.url);
  const auth = `Authorization: Bearer ${target.key}\r\n`;
  const path = `/v1/sessions/${target.sessionId}/exec`;
  const shapes: (() => string | Buffer)[] = [
    () => rng.bytes(rng.int(1, 4096)),
    () =>
      `${rng.pick(['GETT', 'get', 'CONNECT', 'TRACE', '\u0000'])} ${rng.pick(['/', '*', 'http://evil/', path, '/%', '//..'])} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`,
    () => `GET /v1/sessions HTTP/1.1\r\nHost: x\r\n${auth}${'X-Flood: y\r\n'.repeat(rng.int(100, 3000))}\r\n`,
    () => `GET /v1/sessions HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(rng.int(16, 200) * 1024)}\r\n\r\n`,
    () =>
      `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${rng.pick(['-1', 'abc', '99999999999999999999', '10, 20', ''])}\r\n\r\n{"cmd":"true"}`,
    () => `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Length: 5\r\nContent-Length: 9\r\n\r\n{"cmd"`,
    () =>
      `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding: chunked\r\n\r\n${rng.pick(['zz\r\n', 'ffffffffffffffff\r\nab', '5\r\n{"cmd\r\n0\r\n', '-1\r\n\r\n'])}`,
    () => `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Length: 100\r\n\r\n{"cmd":`,
    () => `GET / HTTP/0.9\r\n\r\n`,
    () => `GET /v1/sessions HTTP/1.1\r\nHost: x\r\n${auth}\r\n`.repeat(rng.int(2, 50)),
    () => `GET /${'a/'.repeat(rng.int(1000, 20000))} HTTP/1.1\r\nHost: x\r\n\r\n`,
  ];
  const raw = rng.pick(shapes)();
  return {
    description: `raw ${JSON.stringify(raw.toString('latin1').slice(0, 200))}`,
    run: async () => {
      const { reply } = await sendRawRequest(host, Number(port), raw, 3000).catch(() => ({ reply: '' }));
      // Pipelined requests get several answers: the worst counts.
      const statuses = [...reply.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
      return { status: statuses.length ? Math.max(...statuses) : 0, reply: reply.slice(0, 500) };
    },
  };
}

/** A stream opened and fed malformed frames, or mutated messages, then dropped. */
function stream(target: FuzzTarget, rng: Random): Attempt {
  const route = rng.pick(streamRoutes);
  const path = fillPath(route, target, rng) + queryOf(route.query, rng);
  const { hostname: host, port } = new URL(target.url);
  const key = keyFor(target, rng);
  const headers: Record<string, string> = key === null ? {} : { authorization: `Bearer ${key}` };
  if (rng.chance(0.4)) {
    const name = rng.pick(Object.keys(malformedFrames));
    return {
      description: `ws ${path.slice(0, 200)} frame: ${name}`,
      run: async () => {
        const result = await sendRawFrame(host, Number(port), path, headers, malformedFrames[name]!.frame, 3000).catch(() => ({ status: 0 }));
        return { status: result.status, reply: '' };
      },
    };
  }
  const start = route.path.endsWith('/pty') ? PtyStartSchema : ExecStreamStartSchema;
  const messages = [sample(start, rng, 0.15), ...Array.from({ length: rng.int(0, 4) }, () => sample(ClientStreamMessageSchema, rng, 0.2))].map((m) =>
    rng.chance(0.1) ? rng.pick(['', '{', 'null', '\u0000', 'x'.repeat(70_000)]) : (JSON.stringify(m) ?? ''),
  );
  return {
    description: `ws ${path.slice(0, 200)} messages ${messages.map((m) => m.slice(0, 100)).join(' | ')}`,
    run: () =>
      new Promise((resolve) => {
        let ws: WebSocket;
        try {
          ws = new WebSocket(target.url.replace(/^http/, 'ws') + path, { headers });
        } catch {
          // A key no HTTP client can send (a control character): nothing reaches the platform.
          resolve({ status: 0, reply: '' });
          return;
        }
        let status = 0;
        const done = (): void => resolve({ status, reply: '' });
        ws.on('unexpected-response', (_req, res) => {
          status = res.statusCode ?? 0;
          res.resume();
          ws.terminate();
          done();
        });
        ws.on('upgrade', () => (status = 101));
        ws.on('open', () => {
          for (const m of messages) ws.send(m);
          setTimeout(() => ws.terminate(), rng.int(10, 300));
        });
        ws.on('close', done);
        ws.on('error', done);
      }),
  };
}
