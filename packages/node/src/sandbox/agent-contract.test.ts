import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import {
  DaemonMemoryReliefSchema,
  type ErrorCode,
  ExecResultSchema,
  FileListSchema,
  FileStatSchema,
  OkSchema,
  ProcessListSchema,
  ServerStreamMessageSchema,
  WatchEventSchema,
  errorFromBody,
} from '@space/protocol';
import { malformedFrames, sendRawFrame } from '@space/server-kit/testing';
import type { z } from 'zod';
import { freePort } from '@space/server-kit';

/**
 * The node-facing contract of the in-sandbox agent, tested from the TypeScript side: the real Go
 * binary runs on the host (on loopback, in a scratch working directory) and every answer is checked
 * against the @space/protocol schemas the node agent checks it with. The agent inside real sandboxes
 * is covered by the end-to-end suites.
 */
const agentDist = fileURLToPath(new URL('../../../agent/dist/', import.meta.url));

/** Starts the agent binary on loopback, serving `workdir`, with a fresh token file in `dir`. */
async function startAgent(
  dir: string,
  token: string,
  extraEnv: Record<string, string> = {},
): Promise<{ agent: ChildProcess; port: number; workdir: string; tokenFile: string }> {
  const workdir = path.join(dir, 'workspace');
  await mkdir(workdir, { recursive: true });
  const tokenFile = path.join(dir, 'token');
  await writeFile(tokenFile, `${token}\n`, { mode: 0o600 });
  const port = await freePort();
  const agent = spawn(path.join(agentDist, 'space-agent'), [], {
    env: {
      PATH: process.env.PATH,
      SPACE_DAEMON_HOST: '127.0.0.1',
      SPACE_DAEMON_PORT: String(port),
      SPACE_DAEMON_TOKEN_FILE: tokenFile,
      SPACE_WORKDIR: workdir,
      SPACE_PTY_HELPER: path.join(agentDist, 'space-pty'),
      FROM_SANDBOX_ENV: 'kept',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    agent.once('exit', (code) => reject(new Error(`agent exited with ${code}`)));
    agent.stdout!.once('data', () => resolve());
  });
  return { agent, port, workdir, tokenFile };
}

describe('in-sandbox agent contract (the Go binary against the protocol schemas)', () => {
  let dir: string;
  let workdir: string;
  let port: number;
  let token = randomBytes(32).toString('hex');
  let agent: ChildProcess;
  let tokenFile: string;
  const base = () => `http://127.0.0.1:${port}`;

  async function call(method: string, route: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: unknown }> {
    const res = await fetch(`${base()}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  }

  async function ok<S extends z.ZodTypeAny>(schema: S, method: string, route: string, body?: unknown): Promise<z.infer<S>> {
    const { status, json } = await call(method, route, body);
    assert.equal(status, 200, JSON.stringify(json));
    return schema.parse(json);
  }

  async function fails(code: ErrorCode, status: number, method: string, route: string, body?: unknown): Promise<string> {
    const res = await call(method, route, body);
    const error = errorFromBody(res.json, 'INTERNAL', 'unparsable error body');
    assert.equal(error.code, code, JSON.stringify(res.json));
    assert.equal(res.status, status);
    return error.message;
  }

  function socket(route: string): WebSocket {
    return new WebSocket(`ws://127.0.0.1:${port}${route}`, { headers: { authorization: `Bearer ${token}` } });
  }

  /** Every message of a stream until it closes, each checked against `schema`. */
  function messages<S extends z.ZodTypeAny>(ws: WebSocket, schema: S): Promise<{ messages: z.infer<S>[]; closeCode: number }> {
    return new Promise((resolve, reject) => {
      const got: z.infer<S>[] = [];
      ws.on('message', (raw) => got.push(schema.parse(JSON.parse(raw.toString()))));
      ws.on('error', reject);
      ws.on('close', (closeCode) => resolve({ messages: got, closeCode }));
    });
  }

  const outputOf = (msgs: z.infer<typeof ServerStreamMessageSchema>[]): string =>
    msgs.map((m) => (m.type === 'stdout' || m.type === 'stderr' ? Buffer.from(m.data, 'base64').toString() : '')).join('');

  before(async () => {
    assert.ok(existsSync(path.join(agentDist, 'space-agent')), 'packages/agent/dist/space-agent is built by npm run build');
    dir = await mkdtemp(path.join(tmpdir(), 'space-agent-contract-'));
    ({ agent, port, workdir, tokenFile } = await startAgent(dir, token));
  });

  after(async () => {
    agent?.kill('SIGTERM');
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('the token file is gone once it serves; every route wants the token', async () => {
    assert.equal(existsSync(tokenFile), false);
    const res = await fetch(`${base()}/health`);
    assert.equal(res.status, 401);
    assert.equal(errorFromBody(await res.json(), 'INTERNAL', '').code, 'UNAUTHORIZED');
    await ok(OkSchema, 'GET', '/health');
    await ok(OkSchema, 'POST', '/sync', {});
    // Here the agent reads the host's /proc/meminfo, with room to spare: it kills nothing.
    const relief = await ok(DaemonMemoryReliefSchema, 'POST', '/relieve-memory', {});
    assert.equal(relief.killed, null);
    assert.ok(relief.totalMiB > 0 && relief.availableMiB > 0);
    await fails('ROUTE_NOT_FOUND', 404, 'GET', '/nothing-here');
    await fails('METHOD_NOT_ALLOWED', 405, 'PATCH', '/files');
  });

  test('buffered exec: output, exit code, stdin, environment, timeout, truncation', async () => {
    const run = await ok(ExecResultSchema, 'POST', '/exec', { cmd: 'echo out; echo err >&2; exit 3' });
    assert.deepEqual([run.exitCode, run.stdout, run.stderr], [3, 'out\n', 'err\n']);
    const cat = await ok(ExecResultSchema, 'POST', '/exec', { cmd: ['cat'], stdin: 'piped' });
    assert.equal(cat.stdout, 'piped');
    const env = await ok(ExecResultSchema, 'POST', '/exec', { cmd: 'echo $FROM_SANDBOX_ENV $MINE; pwd', env: { MINE: 'given' } });
    assert.equal(env.stdout, `kept given\n${workdir}\n`);
    assert.equal(env.stdout.includes('SPACE_DAEMON'), false);
    const slow = await ok(ExecResultSchema, 'POST', '/exec', { cmd: 'sleep 5', timeoutMs: 200 });
    assert.deepEqual([slow.exitCode, slow.timedOut], [124, true]);
    const big = await ok(ExecResultSchema, 'POST', '/exec', { cmd: 'head -c 9000000 /dev/zero | tr "\\0" a' });
    assert.equal(big.truncated, true);
    assert.equal(big.stdout.length, 8 * 1024 * 1024);
    const killed = await ok(ExecResultSchema, 'POST', '/exec', { cmd: 'kill -TERM $$' });
    assert.deepEqual([killed.exitCode, killed.signal], [143, 'SIGTERM']);
  });

  test('bad requests get the protocol errors', async () => {
    await fails('VALIDATION_FAILED', 400, 'POST', '/exec', { cmd: ['true'], surprise: 1 });
    await fails('VALIDATION_FAILED', 400, 'POST', '/exec', { cmd: [] });
    await fails('VALIDATION_FAILED', 400, 'POST', '/exec', { cmd: 'true', timeoutMs: 1.5 });
    await fails('VALIDATION_FAILED', 400, 'POST', '/exec', { cmd: 'true', env: { 'BAD-NAME': 'x' } });
    await fails('INVALID_JSON', 400, 'POST', '/exec', '{"cmd": ');
    await fails('PAYLOAD_TOO_LARGE', 413, 'POST', '/exec', { cmd: 'true', stdin: 'x'.repeat(1024 * 1024 + 10) });
    await fails('EXEC_FAILED', 400, 'POST', '/exec', { cmd: ['/no/such/program'] });
    await writeFile(path.join(workdir, 'plain'), 'x');
    await fails('NOT_A_DIRECTORY', 400, 'POST', '/exec', { cmd: 'true', cwd: 'plain' });
    await fails('FILE_NOT_FOUND', 404, 'POST', '/exec', { cmd: 'true', cwd: 'missing' });
    await fails('VALIDATION_FAILED', 400, 'GET', '/files/stat?path=../etc');
    await fails('VALIDATION_FAILED', 400, 'GET', '/files/stat?path=a&extra=1');
    await fails('PROCESS_NOT_FOUND', 404, 'POST', '/processes/999999/signal', { signal: 'SIGTERM' });
    await fails('VALIDATION_FAILED', 400, 'POST', '/processes/1/signal', { signal: 'SIGNOPE' });
  });

  test('background processes: listed, signalled, re-attached with replay from an offset', async () => {
    const started = await call('POST', '/exec', { cmd: 'echo first; echo second; sleep 30', background: true });
    const { pid } = started.json as { pid: number };
    await new Promise((r) => setTimeout(r, 200));
    const listed = await ok(ProcessListSchema, 'GET', '/processes');
    const entry = listed.processes.find((p) => p.pid === pid);
    assert.deepEqual([entry?.running, entry?.cmd, entry?.exitCode], [true, 'echo first; echo second; sleep 30', null]);
    assert.match(entry?.instance ?? '', /^[0-9a-f]{16}$/);
    await fails('PROCESS_NOT_FOUND', 404, 'GET', `/processes/${pid}/attach?instance=0000000000000000`);
    await fails('VALIDATION_FAILED', 400, 'GET', `/processes/${pid}/attach?instance=nothex`);

    const attached = socket(`/processes/${pid}/attach?after=6`);
    const stream = messages(attached, ServerStreamMessageSchema);
    await new Promise((r) => attached.once('open', r));
    await new Promise((r) => setTimeout(r, 100));
    await ok(OkSchema, 'POST', `/processes/${pid}/signal`, { signal: 'SIGTERM' });
    const { messages: got, closeCode } = await stream;
    assert.equal(closeCode, 1000);
    assert.equal(got[0]?.type, 'started');
    assert.equal(outputOf(got), 'second\n', 'replay starts at the offset');
    assert.deepEqual(got.at(-1), { type: 'exit', exitCode: 143, signal: 'SIGTERM', timedOut: false });
  });

  test('a background process runs past the default exec timeout; a foreground one stops at it', async () => {
    // A second agent whose default timeout is 300 ms instead of 60 s (SPACE_DAEMON_DEFAULT_TIMEOUT_MS, for tests).
    const shortToken = randomBytes(32).toString('hex');
    const short = await startAgent(path.join(dir, 'short-timeout'), shortToken, { SPACE_DAEMON_DEFAULT_TIMEOUT_MS: '300' });
    try {
      const call = async (route: string, body?: unknown): Promise<unknown> => {
        const res = await fetch(`http://127.0.0.1:${short.port}${route}`, {
          method: body === undefined ? 'GET' : 'POST',
          headers: { authorization: `Bearer ${shortToken}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return res.json();
      };
      const foreground = ExecResultSchema.parse(await call('/exec', { cmd: 'sleep 2' }));
      assert.deepEqual([foreground.exitCode, foreground.timedOut], [124, true]);
      const { pid } = (await call('/exec', { cmd: 'sleep 30', background: true })) as { pid: number };
      await new Promise((r) => setTimeout(r, 800));
      const listed = ProcessListSchema.parse(await call('/processes'));
      assert.equal(listed.processes.find((p) => p.pid === pid)?.running, true, 'the background process outlives the default timeout');
    } finally {
      short.agent.kill('SIGTERM');
    }
  });

  test('streamed exec and PTY: start, stdin, EOF, output in order, exit', async () => {
    const ws = socket('/exec/stream');
    const stream = messages(ws, ServerStreamMessageSchema);
    ws.on('open', () => {
      ws.send(JSON.stringify({ type: 'start', cmd: ['sh', '-c', 'while read l; do echo "got $l"; done; exit 7'] }));
      ws.send(JSON.stringify({ type: 'stdin', data: Buffer.from('a\nb\n').toString('base64') }));
      ws.send(JSON.stringify({ type: 'stdin-eof' }));
    });
    const { messages: got } = await stream;
    assert.equal(outputOf(got), 'got a\ngot b\n');
    assert.deepEqual(got.at(-1), { type: 'exit', exitCode: 7, signal: null, timedOut: false });

    const pty = socket('/pty');
    const ptyStream = messages(pty, ServerStreamMessageSchema);
    pty.on('open', () => {
      pty.send(JSON.stringify({ type: 'start', cmd: ['sh', '-c', 'tty; stty size; exit 4'], cols: 91, rows: 33 }));
    });
    const { messages: ptyGot } = await ptyStream;
    assert.match(outputOf(ptyGot), /\/dev\/pts\/\d+\r?\n33 91/);
    assert.deepEqual(ptyGot.at(-1), { type: 'exit', exitCode: 4, signal: null, timedOut: false });
  });

  test('a streamed process that prints at once loses nothing before the stream subscribes', async () => {
    for (let i = 0; i < 20; i++) {
      const ws = socket('/exec/stream');
      const stream = messages(ws, ServerStreamMessageSchema);
      ws.on('open', () => ws.send(JSON.stringify({ type: 'start', cmd: ['sh', '-c', 'echo early; exit 3'] })));
      const { messages: got } = await stream;
      assert.equal(outputOf(got), 'early\n', `round ${i}`);
      assert.deepEqual(got.at(-1), { type: 'exit', exitCode: 3, signal: null, timedOut: false });
    }
  });

  test('a bad start message or a bad later message is answered on the stream', async () => {
    const ws = socket('/exec/stream');
    const stream = messages(ws, ServerStreamMessageSchema);
    ws.on('open', () => ws.send(JSON.stringify({ type: 'start', cmd: 'true', extra: 1 })));
    const { messages: got, closeCode } = await stream;
    assert.equal(closeCode, 1011);
    assert.equal(got[0]?.type === 'error' && got[0].code, 'VALIDATION_FAILED');

    const live = socket('/exec/stream');
    const liveStream = messages(live, ServerStreamMessageSchema);
    live.on('open', () => {
      live.send(JSON.stringify({ type: 'start', cmd: 'cat' }));
      live.send(JSON.stringify({ type: 'stdin', data: '***' }));
      live.send(JSON.stringify({ type: 'stdin-eof' }));
    });
    const { messages: liveGot } = await liveStream;
    assert.ok(liveGot.some((m) => m.type === 'error' && m.code === 'VALIDATION_FAILED'));
    assert.equal(liveGot.at(-1)?.type, 'exit');
  });

  test('malformed frames close only their own stream, with the RFC 6455 code', async () => {
    for (const [name, { frame, closeCode }] of Object.entries(malformedFrames)) {
      const result = await sendRawFrame('127.0.0.1', port, '/exec/stream', { authorization: `Bearer ${token}` }, frame);
      assert.equal(result.status, 101, name);
      assert.equal(result.closeCode, closeCode, name);
    }
    await ok(OkSchema, 'GET', '/health');
  });

  test('files: upload, download, stat, list, mkdir, move, remove, and their errors', async () => {
    const put = await fetch(`${base()}/files?path=dir/a.txt`, { method: 'PUT', headers: { authorization: `Bearer ${token}` }, body: 'hello' });
    assert.equal(put.status, 200);
    const stat = FileStatSchema.parse(await put.json());
    assert.deepEqual([stat.path, stat.type, stat.size, stat.mode], [path.join(workdir, 'dir/a.txt'), 'file', 5, 0o644]);
    const get = await fetch(`${base()}/files?path=dir/a.txt`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(await get.text(), 'hello');
    await ok(OkSchema, 'POST', '/files/mkdir', { path: 'dir/sub/deeper' });
    await ok(OkSchema, 'POST', '/files/move', { from: 'dir/a.txt', to: 'dir/sub/b.txt' });
    await writeFile(path.join(workdir, 'dir/other.txt'), 'other');
    await fails('FILE_EXISTS', 409, 'POST', '/files/move', { from: 'dir/other.txt', to: 'dir/sub/b.txt' });
    await fails('INVALID_PATH', 400, 'POST', '/files/move', { from: 'dir', to: 'dir/sub/inside' });
    const list = await ok(FileListSchema, 'GET', '/files/list?path=dir/sub');
    assert.deepEqual(
      list.entries.map((e) => [e.name, e.type]),
      [
        ['b.txt', 'file'],
        ['deeper', 'directory'],
      ],
    );
    await fails('IS_A_DIRECTORY', 400, 'GET', '/files?path=dir');
    await fails('FILE_NOT_FOUND', 404, 'GET', '/files/stat?path=dir/none');
    await fails('DIRECTORY_NOT_EMPTY', 409, 'DELETE', '/files?path=dir');
    await ok(OkSchema, 'DELETE', '/files?path=dir&recursive=true');
    assert.equal(existsSync(path.join(workdir, 'dir')), false);
  });

  test('watch: ready, then a change event for a write under the path', async () => {
    await mkdir(path.join(workdir, 'watched/inner'), { recursive: true });
    const ws = socket('/files/watch?path=watched');
    const events: z.infer<typeof WatchEventSchema>[] = [];
    const seen = new Promise<void>((resolve) => {
      ws.on('message', (raw) => {
        const event = WatchEventSchema.parse(JSON.parse(raw.toString()));
        events.push(event);
        if (event.type === 'ready') void writeFile(path.join(workdir, 'watched/inner/new.txt'), 'x');
        if (event.type === 'change' && event.path.endsWith('inner/new.txt')) resolve();
      });
    });
    await seen;
    ws.close();
    assert.deepEqual(events[0], { type: 'ready', path: path.join(workdir, 'watched') });
  });

  test('rebind: a new token and session environment; the old token is refused', async () => {
    const newToken = randomBytes(32).toString('hex');
    await fails('VALIDATION_FAILED', 400, 'POST', '/rebind', { token: 'short', env: {}, newSession: false });
    await ok(OkSchema, 'POST', '/rebind', { token: newToken, env: { SESSION_VAR: 'v1' }, newSession: true });
    const old = await call('GET', '/health');
    assert.equal(old.status, 401);
    token = newToken;
    const run = await ok(ExecResultSchema, 'POST', '/exec', { cmd: 'echo $SESSION_VAR' });
    assert.equal(run.stdout, 'v1\n');
    const listed = await ok(ProcessListSchema, 'GET', '/processes');
    assert.deepEqual(
      listed.processes.filter((p) => !p.running && p.cmd !== 'echo $SESSION_VAR'),
      [],
      'a new session sees none of the finished processes',
    );
  });
});
