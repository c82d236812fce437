// A session's handle: one method per session operation of the API (files, exec, streams, checkpoints, previews), mirroring it, over ~300 lines because the API is.
import { Readable } from 'node:stream';
import type { WebSocket } from 'ws';
import { SessionDesktop } from './desktop.js';
import { FileWatch } from './file-watch.js';
import { CodeContexts, codeEvents, runCode, type CodeEventData, type Execution, type RunCodeOptions } from './code.js';
import { ExecStream, type ProcessBinding, type Reattach } from './exec-stream.js';
import { SpaceApiError, SpaceClientError, isSpaceApiError } from './errors.js';
import type { CallOptions } from './options.js';
import type { Transport } from './transport.js';
import type {
  CheckpointData,
  EgressAuditEntry,
  EgressPolicy,
  ExecOptions,
  ExecResult,
  FileEntry,
  PathHistoryData,
  PathRestoreData,
  ProcessData,
  ProcessListData,
  SandboxMetricsData,
  ServiceData,
  ListeningPortData,
  PreviewData,
  SessionData,
} from './types.js';

/** A path as the files routes' query. */
export const q = (path: string): string => `?path=${encodeURIComponent(path)}`;

/** Reads and other calls that may simply be repeated wait out a sandbox dying, or stopped by the session's own restore or kill, under them. */
async function retryOnceIfSandboxLost<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!isSpaceApiError(err, 'SANDBOX_DIED') && !isSpaceApiError(err, 'SANDBOX_STOPPED')) throw err;
    return call();
  }
}

/** Files of a session's sandbox. Relative paths are under /workspace. */
export class SessionFiles {
  constructor(
    private readonly t: Transport,
    private readonly base: string,
  ) {}

  /**
   * Watches a file or a directory tree: `for await (const change of session.files.watch('src'))`;
   * `await watch.ready` before making changes that must be seen; `watch.close()` ends it.
   */
  watch(path: string): FileWatch {
    return new FileWatch(this.t.socket(`${this.base}/files/watch${q(path)}`));
  }

  async read(path: string, opts: CallOptions = {}): Promise<Buffer> {
    return retryOnceIfSandboxLost(async () => Buffer.from(await (await this.t.request('GET', `${this.base}/files${q(path)}`, opts)).arrayBuffer()));
  }

  async write(path: string, data: string | Uint8Array, opts: CallOptions = {}): Promise<FileEntry> {
    return (
      await this.t.request('PUT', `${this.base}/files${q(path)}`, { ...opts, body: new Blob([typeof data === 'string' ? data : new Uint8Array(data)]) })
    ).json() as Promise<FileEntry>;
  }

  /** Streams a local stream into a file in the sandbox; nothing is buffered whole. */
  async upload(path: string, source: Readable, opts: CallOptions = {}): Promise<FileEntry> {
    const body = Readable.toWeb(source) as unknown as ReadableStream<Uint8Array>;
    return (await this.t.request('PUT', `${this.base}/files${q(path)}`, { ...opts, body })).json() as Promise<FileEntry>;
  }

  /** A file in the sandbox as a Node.js stream. */
  async download(path: string, opts: CallOptions = {}): Promise<Readable> {
    const res = await retryOnceIfSandboxLost(() => this.t.request('GET', `${this.base}/files${q(path)}`, opts));
    return Readable.fromWeb(res.body as never);
  }

  async list(path: string, opts: CallOptions = {}): Promise<FileEntry[]> {
    return retryOnceIfSandboxLost(async () => (await this.t.json<{ entries: FileEntry[] }>('GET', `${this.base}/files/list${q(path)}`, opts)).entries);
  }

  async stat(path: string, opts: CallOptions = {}): Promise<FileEntry> {
    return retryOnceIfSandboxLost(() => this.t.json<FileEntry>('GET', `${this.base}/files/stat${q(path)}`, opts));
  }

  /** The path in each of the session's checkpoints, oldest first, with how it changed from the one before: "when did this file change" in one call. */
  async history(path: string, opts: CallOptions = {}): Promise<PathHistoryData> {
    return this.t.json<PathHistoryData>('GET', `${this.base}/files/history${q(path)}`, opts);
  }

  /**
   * Puts `path` as it was in a checkpoint of the session's lineage back (at `opts.to`, else the
   * same path), while processes run; an fs checkpoint is taken first: restore `undoCheckpointId` to undo.
   */
  async restore(checkpointId: string, path: string, opts: CallOptions & { to?: string } = {}): Promise<PathRestoreData> {
    const { to, ...call } = opts;
    return this.t.json<PathRestoreData>('POST', `${this.base}/files/restore`, { ...call, json: { checkpointId, path, ...(to === undefined ? {} : { to }) } });
  }

  async mkdir(path: string, opts: CallOptions = {}): Promise<void> {
    await this.t.json('POST', `${this.base}/files/mkdir`, { ...opts, json: { path, recursive: true } });
  }

  async move(from: string, to: string, opts: CallOptions & { overwrite?: boolean } = {}): Promise<void> {
    await this.t.json('POST', `${this.base}/files/move`, { ...opts, json: { from, to, overwrite: opts.overwrite ?? false } });
  }

  async remove(path: string, opts: CallOptions & { recursive?: boolean } = {}): Promise<void> {
    await this.t.json('DELETE', `${this.base}/files${q(path)}${opts.recursive ? '&recursive=true' : ''}`, opts);
  }
}

/**
 * `reattach: false`: a stream that ends when its connection drops (the sandbox was paused or
 * killed) instead of re-attaching, which would resume the session. For relays that hand the drop on.
 */
export interface StreamOptions {
  reattach?: boolean;
}

/**
 * A session by id, for calls that need nothing but the id (`space.sessions.handle(id)` makes one
 * without a round trip). Every call goes to the API; `refresh()` fetches the session's data.
 */
export class SessionHandle {
  readonly files: SessionFiles;
  /** The code interpreter's contexts (templates with one: `code-interpreter`). */
  readonly codeContexts: CodeContexts;
  /** The desktop (template `desktop`): screenshots, input, applications, windows. */
  readonly desktop: SessionDesktop;
  private readonly base: string;

  constructor(
    protected readonly t: Transport,
    readonly id: string,
  ) {
    this.base = `/v1/sessions/${encodeURIComponent(id)}`;
    this.files = new SessionFiles(t, this.base);
    this.codeContexts = new CodeContexts(t, this.base);
    this.desktop = new SessionDesktop(t, this.base);
  }

  /**
   * Runs a cell in a code context (state kept between cells; by default the Python context):
   * `(await session.runCode('x = 6 * 7; x')).text` is `'42'`. Output streams to the callbacks as
   * the cell runs; an aborted `signal` interrupts the cell in the sandbox.
   */
  runCode(code: string, opts: RunCodeOptions = {}): Promise<Execution> {
    return runCode(this.t, this.base, code, opts);
  }

  /** `runCode`'s events one by one, as they come: `for await (const event of await session.codeEvents('print(1)'))`. */
  codeEvents(code: string, opts: Omit<RunCodeOptions, `on${string}`> = {}): Promise<AsyncIterable<CodeEventData>> {
    return codeEvents(this.t, this.base, code, opts);
  }

  /** Runs a command to completion: `{exitCode, stdout, stderr}`. */
  exec(cmd: string | string[], opts: ExecOptions & CallOptions = {}): Promise<ExecResult> {
    return this.t.json<ExecResult>('POST', `${this.base}/exec`, { ...opts, json: execBody(cmd, opts) });
  }

  /** Starts a command that keeps running; returns its pid. */
  async startBackground(cmd: string | string[], opts: ExecOptions & CallOptions = {}): Promise<number> {
    return (await this.t.json<{ pid: number }>('POST', `${this.base}/exec`, { ...opts, json: { ...execBody(cmd, opts), background: true } })).pid;
  }

  /** Runs a command and streams its output: `for await (const event of session.execStream(cmd))`. */
  execStream(cmd: string | string[], opts: ExecOptions & StreamOptions = {}): ExecStream {
    const { stdin: _unused, ...start } = execBody(cmd, opts);
    return new ExecStream(this.t.socket(`${this.base}/exec/stream`), { type: 'start', ...start }, this.reattachUnless(opts));
  }

  /**
   * Re-attaches to a process by pid: its recent output is replayed first. With `binding` (the
   * `sandboxId` and `instance` of an earlier stream's `started`), only to that same process.
   */
  attach(pid: number, opts: StreamOptions & { binding?: ProcessBinding } = {}): ExecStream {
    return new ExecStream(this.reattach(pid, 0, opts.binding ?? {}), null, this.reattachUnless(opts));
  }

  private reattachUnless(opts: StreamOptions): Reattach | null {
    return opts.reattach === false ? null : this.reattach;
  }

  /** A stream's way back to its process after a dropped connection. */
  private readonly reattach = (pid: number, after: number, binding: ProcessBinding): WebSocket => {
    const query = new URLSearchParams({ after: String(after) });
    if (binding.sandbox) query.set('sandbox', binding.sandbox);
    if (binding.instance) query.set('instance', binding.instance);
    return this.t.socket(`${this.base}/processes/${pid}/attach?${query}`);
  };

  /** An interactive terminal; write keystrokes, read `stdout` events, `resize` it. */
  pty(opts: { cmd?: string | string[]; cols?: number; rows?: number; env?: Record<string, string>; cwd?: string } & StreamOptions = {}): ExecStream {
    const { reattach: _reattach, ...start } = opts;
    return new ExecStream(this.t.socket(`${this.base}/pty`), { type: 'start', cols: 80, rows: 24, ...start }, this.reattachUnless(opts));
  }

  /**
   * Sends stdin, its end, or a terminal size to a running process without holding a stream to it:
   * a short re-attach that replays nothing. PROCESS_NOT_FOUND when no such process runs.
   */
  async sendToProcess(pid: number, input: { stdin?: Uint8Array | string; eof?: boolean; resize?: { cols: number; rows: number } }): Promise<void> {
    const ws = this.t.socket(`${this.base}/processes/${pid}/attach?after=${Number.MAX_SAFE_INTEGER}`);
    let refusal: Error | null = null;
    ws.on('message', (raw) => {
      let m: { type?: string; code?: string; message?: string };
      try {
        m = JSON.parse(raw.toString());
      } catch {
        return void (refusal = new SpaceClientError('PROTOCOL', 'the server sent a message that is not JSON'));
      }
      if (m.type === 'error') refusal = new SpaceApiError(m.code ?? 'INTERNAL', 0, m.message ?? 'the process refused the input');
    });
    ws.once('open', () => {
      if (input.stdin !== undefined) ws.send(JSON.stringify({ type: 'stdin', data: Buffer.from(input.stdin).toString('base64') }));
      if (input.resize) ws.send(JSON.stringify({ type: 'resize', ...input.resize }));
      if (input.eof) ws.send(JSON.stringify({ type: 'stdin-eof' }));
      ws.close(1000);
    });
    await new Promise<void>((resolve, reject) => {
      ws.on('error', (err) => (refusal ??= isSpaceApiError(err) ? err : new SpaceClientError('NETWORK', err.message)));
      ws.once('close', () => (refusal ? reject(refusal) : resolve()));
    });
  }

  /** The processes the daemon started (running or ended, newest last). */
  async processes(opts: CallOptions = {}): Promise<ProcessData[]> {
    return (await this.processList(opts)).processes;
  }

  /** `processes()` and how many live processes run that the daemon did not start (`untracked`). */
  async processList(opts: CallOptions = {}): Promise<ProcessListData> {
    return retryOnceIfSandboxLost(() => this.t.json<ProcessListData>('GET', `${this.base}/processes`, opts));
  }

  async signal(pid: number, signal: string, opts: CallOptions = {}): Promise<void> {
    await this.t.json('POST', `${this.base}/processes/${pid}/signal`, { ...opts, json: { signal } });
  }

  /**
   * `kind: 'fs'` (default) snapshots the files; `'full'` also saves memory and processes. A full one
   * the sandbox cannot give now (a stream attached, a connection with the outside the node did not open) throws
   * FULL_CHECKPOINT_REFUSED with `details.fallbackCheckpointId`, the fs checkpoint taken instead.
   */
  checkpoint(opts: CallOptions & { kind?: 'fs' | 'full' } = {}): Promise<CheckpointData> {
    return this.t.json<CheckpointData>('POST', `${this.base}/checkpoints`, { ...opts, json: { kind: opts.kind ?? 'fs' } });
  }

  async checkpoints(opts: CallOptions = {}): Promise<CheckpointData[]> {
    return (await this.t.json<{ checkpoints: CheckpointData[] }>('GET', `${this.base}/checkpoints`, opts)).checkpoints;
  }

  /**
   * Resets the session to a checkpoint of its lineage (its own, or one taken in a fork). Its volumes
   * keep their files unless `restoreVolumes`: then the read-write ones go back to the checkpoint's copies.
   */
  async restore(checkpointId: string, opts: { restoreVolumes?: boolean } & CallOptions = {}): Promise<Session> {
    const { restoreVolumes, ...call } = opts;
    return this.withData(await this.t.json<SessionData>('POST', `${this.base}/restore`, { ...call, json: { checkpointId, restoreVolumes } }));
  }

  /** Kills only the sandbox; the session resumes on its next call. */
  async killSandbox(opts: CallOptions = {}): Promise<void> {
    await this.t.json('POST', `${this.base}/sandbox/kill`, opts);
  }

  /**
   * Saves the sandbox in a checkpoint (full where it can be, so processes continue; else fs) and
   * stops it; the next call resumes the session. Throws SESSION_NOT_RUNNING when no sandbox runs.
   */
  async pause(opts: CallOptions = {}): Promise<CheckpointData> {
    return (await this.t.json<{ checkpoint: CheckpointData }>('POST', `${this.base}/pause`, opts)).checkpoint;
  }

  /** Deletes the session (or pauses it, `onTimeout: 'pause'`) `timeoutSec` from now; 0: never. */
  async setTimeout(timeoutSec: number, opts: CallOptions & { onTimeout?: 'delete' | 'pause' } = {}): Promise<Session> {
    const { onTimeout, ...call } = opts;
    return this.withData(
      await this.t.json<SessionData>('POST', `${this.base}/timeout`, { ...call, json: { timeoutSec, ...(onTimeout ? { onTimeout } : {}) } }),
    );
  }

  /** What the sandbox uses now; SESSION_NOT_RUNNING when no sandbox runs (it is not resumed for this). */
  async metrics(opts: CallOptions = {}): Promise<SandboxMetricsData> {
    return this.t.json<SandboxMetricsData>('GET', `${this.base}/metrics`, opts);
  }

  /** The TCP ports something listens on in the sandbox (resumes the session). */
  async ports(opts: CallOptions = {}): Promise<ListeningPortData[]> {
    return (await this.t.json<{ ports: ListeningPortData[] }>('GET', `${this.base}/ports`, opts)).ports;
  }

  /**
   * A preview URL for a port: it works without a key until `expiresAt` (default 1 hour), opening
   * it sets a cookie for the port's path. `revokePreviews(port)` ends every one of the port.
   */
  async preview(port: number, opts: CallOptions & { ttlSec?: number } = {}): Promise<PreviewData> {
    const { ttlSec, ...call } = opts;
    return this.t.json<PreviewData>('POST', `${this.base}/preview-tokens/${port}`, { ...call, json: ttlSec === undefined ? {} : { ttlSec } });
  }

  async revokePreviews(port: number, opts: CallOptions = {}): Promise<number> {
    return (await this.t.json<{ revoked: number }>('DELETE', `${this.base}/preview-tokens/${port}`, opts)).revoked;
  }

  /** Makes a port public (its preview URLs work for anyone, without a key or token), or private again. */
  async setPortPublic(port: number, isPublic: boolean, opts: CallOptions = {}): Promise<Session> {
    return this.withData(await this.t.json<SessionData>(isPublic ? 'PUT' : 'DELETE', `${this.base}/public-ports/${port}`, opts));
  }

  /** Declares (or replaces) a service: started in every new sandbox that did not restore the processes, and now in a running one. */
  async setService(service: ServiceData, opts: CallOptions = {}): Promise<Session> {
    const { name, ...spec } = service;
    return this.withData(await this.t.json<SessionData>('PUT', `${this.base}/services/${encodeURIComponent(name)}`, { ...opts, json: spec }));
  }

  async removeService(name: string, opts: CallOptions = {}): Promise<Session> {
    return this.withData(await this.t.json<SessionData>('DELETE', `${this.base}/services/${encodeURIComponent(name)}`, opts));
  }

  /** A token that acts on this session's sandbox only (exec, processes, files, streams) and reads the session. */
  async createToken(opts: CallOptions = {}): Promise<string> {
    return (await this.t.json<{ token: string }>('POST', `${this.base}/tokens`, opts)).token;
  }

  /** Changes what the sandbox may reach; applies to its next request, no restart. */
  async setEgress(policy: Partial<EgressPolicy>, opts: CallOptions = {}): Promise<Session> {
    return this.withData(await this.t.json<SessionData>('PUT', `${this.base}/egress`, { ...opts, json: policy }));
  }

  /** Takes the secret under env var `name` from this session only; its gateway injects it no more from the next request. */
  async revokeSecret(name: string, opts: CallOptions = {}): Promise<Session> {
    return this.withData(await this.t.json<SessionData>('DELETE', `${this.base}/secrets/${encodeURIComponent(name)}`, opts));
  }

  /** The newest `limit` (default 100) requests the sandbox sent out, oldest first. */
  async egressLog(opts: CallOptions & { limit?: number } = {}): Promise<EgressAuditEntry[]> {
    const { limit, ...call } = opts;
    return (await this.t.json<{ entries: EgressAuditEntry[] }>('GET', `${this.base}/egress/audit?limit=${limit ?? 100}`, call)).entries;
  }

  /** The session as it is now, with its sandbox history and checkpoints. */
  async refresh(opts: CallOptions = {}): Promise<Session> {
    return this.withData(await this.t.json<SessionData>('GET', this.base, opts));
  }

  async delete(opts: CallOptions = {}): Promise<void> {
    await this.t.json('DELETE', this.base, opts);
  }

  /** The session with data the API just sent: a new Session for a handle; a Session updates itself. */
  protected withData(data: SessionData): Session {
    return new Session(this.t, data);
  }
}

/** A session: the durable thing, with its data as last fetched. Its sandbox may die; calls resume it. */
export class Session extends SessionHandle {
  constructor(
    t: Transport,
    public data: SessionData,
  ) {
    super(t, data.id);
  }

  protected override withData(data: SessionData): Session {
    this.data = data;
    return this;
  }
}

function execBody(cmd: string | string[], opts: ExecOptions): Record<string, unknown> {
  const body: Record<string, unknown> = { cmd };
  if (opts.cwd !== undefined) body.cwd = opts.cwd;
  if (opts.env !== undefined) body.env = opts.env;
  if (opts.stdin !== undefined) body.stdin = opts.stdin;
  if (opts.commandTimeoutMs !== undefined) body.timeoutMs = opts.commandTimeoutMs;
  return body;
}
