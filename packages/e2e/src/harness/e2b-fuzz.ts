import { z } from 'zod';
import {
  E2bForkSchema,
  E2bListQuerySchema,
  E2bNetworkSchema,
  E2bNewSandboxSchema,
  E2bPauseSchema,
  E2bSnapshotListQuerySchema,
  E2bTimeoutSchema,
} from '@space/protocol';
import type { Attempt, FuzzTarget } from './fuzz-types.js';
import type { Random } from './random.js';
import { sample } from './schema-sampler.js';

interface E2bRoute {
  method: string;
  path: string;
  body?: z.ZodTypeAny;
  query?: z.ZodTypeAny;
  /**
   * How often the target's real sandbox is named: never where it would be deleted, paused or given a
   * short timeout, seldom where a full checkpoint is taken (forks), so the run keeps its sandbox.
   */
  real: number;
}

const controlRoutes: E2bRoute[] = [
  { method: 'POST', path: '/v2/sandboxes', body: E2bNewSandboxSchema, real: 0 },
  { method: 'POST', path: '/sandboxes', body: E2bNewSandboxSchema, real: 0 },
  { method: 'GET', path: '/v2/sandboxes', query: E2bListQuerySchema, real: 0 },
  { method: 'GET', path: '/sandboxes', real: 0 },
  { method: 'GET', path: '/sandboxes/:id', real: 0.85 },
  { method: 'DELETE', path: '/sandboxes/:id', real: 0 },
  { method: 'POST', path: '/sandboxes/:id/timeout', body: E2bTimeoutSchema, real: 0 },
  { method: 'POST', path: '/sandboxes/:id/pause', body: E2bPauseSchema, real: 0 },
  { method: 'POST', path: '/v2/sandboxes/:id/connect', body: z.object({}).strict(), real: 0.5 },
  { method: 'POST', path: '/sandboxes/:id/fork', body: E2bForkSchema, real: 0.03 },
  { method: 'GET', path: '/snapshots', query: E2bSnapshotListQuerySchema, real: 0 },
  { method: 'PUT', path: '/sandboxes/:id/network', body: E2bNetworkSchema, real: 0.5 },
  { method: 'GET', path: '/sandboxes/:id/metrics', real: 0.85 },
];

/** envd's procedures, with bodies shaped after their requests (mutated by the sampler); some that are not served. */
const selector = z.object({ pid: z.number().int() });
const procedures: { name: string; body: z.ZodTypeAny }[] = [
  { name: 'process.Process/List', body: z.object({}) },
  {
    name: 'process.Process/Start',
    body: z.object({ process: z.object({ cmd: z.enum(['true', '/bin/echo', '']), args: z.array(z.string()) }), stdin: z.boolean() }),
  },
  { name: 'process.Process/Connect', body: z.object({ process: selector }) },
  { name: 'process.Process/SendInput', body: z.object({ process: selector, input: z.object({ stdin: z.string() }) }) },
  { name: 'process.Process/Update', body: z.object({ process: selector, pty: z.object({ size: z.object({ cols: z.number(), rows: z.number() }) }) }) },
  { name: 'process.Process/CloseStdin', body: z.object({ process: selector }) },
  { name: 'process.Process/StreamInput', body: z.object({}) },
  { name: 'process.Process/Nope', body: z.object({}) },
  { name: 'filesystem.Filesystem/Stat', body: z.object({ path: z.string() }) },
  { name: 'filesystem.Filesystem/ListDir', body: z.object({ path: z.enum(['/', '/tmp', '..', '']), depth: z.number().int() }) },
  { name: 'filesystem.Filesystem/MakeDir', body: z.object({ path: z.enum(['/tmp/fuzz/a', '/tmp/fuzz', '']) }) },
  { name: 'filesystem.Filesystem/WatchDir', body: z.object({ path: z.enum(['/tmp', '/nope']), recursive: z.boolean() }) },
  { name: 'filesystem.Filesystem/CreateWatcher', body: z.object({ path: z.string() }) },
  { name: 'filesystem.Filesystem/Nope', body: z.object({}) },
];

const garbageIds = ['', 'x', 'ses_', '%2e%2e%2f', `ses_${'a'.repeat(300)}`, 'ses_doesnotexist0'];

/**
 * One hostile call to the E2B API (`/e2b`): control routes with bodies mutated from their zod
 * schemas and wrong keys, envd's Connect procedures with mutated bodies, wrong content types,
 * missing or wrong access tokens, and `/files` garbage. A streamed answer is read for its status
 * only (a started command may run on).
 */
export function e2bCall(target: FuzzTarget, rng: Random): Attempt {
  const roll = rng.next();
  if (roll < 0.5) return controlCall(target, rng);
  if (roll < 0.9) return envdCall(target, rng);
  return filesCall(target, rng);
}

function send(target: FuzzTarget, description: string, path: string, init: RequestInit): Attempt {
  return {
    description,
    run: async () => {
      const res = await fetch(target.url + path, init).catch(() => null);
      if (!res) return { status: 0, reply: '' };
      // Streams (server-streamed procedures) are not read to their end: the status and a first chunk are the answer.
      const reader = res.body?.getReader();
      const first = reader ? await Promise.race([reader.read(), new Promise<null>((r) => setTimeout(() => r(null), 2000))]) : null;
      await reader?.cancel().catch(() => undefined);
      return { status: res.status, reply: first?.value ? Buffer.from(first.value).toString('utf8', 0, 500) : '' };
    },
  };
}

function controlCall(target: FuzzTarget, rng: Random): Attempt {
  const route = rng.pick(controlRoutes);
  const id = rng.chance(route.real) ? target.sessionId : rng.pick([...garbageIds, 'ses_0000000000aa']);
  let path = `/e2b${route.path.replace(':id', encodeURIComponent(id))}`;
  if (route.query && rng.chance(0.8)) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries((sample(route.query, rng) as Record<string, unknown>) ?? {})) if (v !== undefined) params.append(k, String(v));
    path += `?${params}`;
  }
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const key = rng.chance(0.85) ? target.key : rng.pick([null, 'sk_wrong', target.accessToken, 'a'.repeat(600)]);
  if (key !== null) headers['x-api-key'] = key;
  const body = route.body ? (rng.chance(0.9) ? JSON.stringify(sample(route.body, rng)) : rng.pick(['{', 'null', '[]', 'x'.repeat(2_000_000)])) : undefined;
  return send(target, `e2b ${route.method} ${path.slice(0, 200)} ${body?.slice(0, 150) ?? ''}`, path, { method: route.method, headers, body });
}

function envdCall(target: FuzzTarget, rng: Random): Attempt {
  const procedure = rng.pick(procedures);
  const headers: Record<string, string> = {
    'content-type': rng.pick(['application/json', 'application/json', 'application/connect+json', 'application/proto', 'text/plain']),
    'connect-protocol-version': '1',
  };
  if (rng.chance(0.9)) headers['e2b-sandbox-id'] = rng.chance(0.8) ? target.sessionId : rng.pick(garbageIds.filter(Boolean));
  if (rng.chance(0.9)) headers['x-access-token'] = rng.chance(0.8) ? target.accessToken : rng.pick(['st_wrong', target.key]);
  const json = JSON.stringify(sample(procedure.body, rng, 0.2)) ?? '{}';
  const roll = rng.next();
  const bytes =
    roll < 0.75 ? null : roll < 0.85 ? envelope(Buffer.from(json), rng) : roll < 0.95 ? rng.bytes(rng.int(0, 4096)) : Buffer.alloc(9 * 1024 * 1024, 0x20);
  const body = bytes === null ? json : new Uint8Array(bytes);
  const path = `/e2b/sandbox/${procedure.name}`;
  return send(target, `envd ${procedure.name} ${headers['content-type']} ${json.slice(0, 150)}`, path, {
    method: rng.chance(0.95) ? 'POST' : 'GET',
    headers,
    body,
  });
}

/** A Connect streaming envelope (flags, length, message), sometimes lying about its length. */
function envelope(message: Buffer, rng: Random): Uint8Array {
  const head = Buffer.alloc(5);
  head.writeUInt8(rng.chance(0.8) ? 0 : rng.int(0, 255), 0);
  head.writeUInt32BE(rng.chance(0.8) ? message.length : rng.int(0, 2 ** 31), 1);
  return Buffer.concat([head, message]);
}

function filesCall(target: FuzzTarget, rng: Random): Attempt {
  const headers: Record<string, string> = { 'e2b-sandbox-id': target.sessionId, 'x-access-token': rng.chance(0.85) ? target.accessToken : 'st_wrong' };
  const path = `/e2b/sandbox/${rng.pick(['files', 'health', 'files/x', 'nope'])}?path=${encodeURIComponent(rng.pick(['/tmp/fuzz.txt', '', '..', '/etc/passwd', 'a'.repeat(5000)]))}`;
  if (rng.chance(0.4)) return send(target, `envd GET ${path.slice(0, 200)}`, path, { method: 'GET', headers });
  headers['content-type'] = rng.pick(['multipart/form-data; boundary=xyz', 'multipart/form-data', 'application/octet-stream', 'text/plain']);
  if (rng.chance(0.2)) headers['content-encoding'] = rng.pick(['gzip', 'br', 'identity']);
  const body = rng.chance(0.5)
    ? `--xyz\r\nContent-Disposition: form-data; name="file"; filename="/tmp/fuzz.txt"\r\n\r\nhello\r\n--xyz--\r\n`
    : new Uint8Array(rng.bytes(rng.int(0, 8192)));
  return send(target, `envd POST ${path.slice(0, 200)} ${headers['content-type']}`, path, { method: 'POST', headers, body });
}
