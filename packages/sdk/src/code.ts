// The code interpreter of a session: contexts (a kernel each, state kept between cells) and cells run in them.
import { SpaceClientError } from './errors.js';
import type { CallOptions } from './options.js';
import type { Transport } from './transport.js';

export type CodeLanguage = 'python' | 'javascript' | 'bash';

export interface CodeContextData {
  id: string;
  language: CodeLanguage;
  cwd: string;
  createdAt: string;
  executionCount: number;
  state: 'idle' | 'busy' | 'dead';
}

/** One display of a cell (or its value, `isMainResult`): the MIME bundle the kernel gave, `image/png` as base64. */
export interface CodeResultData {
  isMainResult: boolean;
  data: Record<string, unknown>;
}

export interface CodeErrorData {
  name: string;
  value: string;
  traceback: string[];
}

/** The events of a run, in order; `end` is last. */
export type CodeEventData =
  | { type: 'stdout' | 'stderr'; text: string }
  | ({ type: 'result' } & CodeResultData)
  | ({ type: 'error' } & CodeErrorData)
  | { type: 'end'; contextId: string; executionCount: number; durationMs: number };

/** A cell a context remembers (its newest 20): the code and the events it sent. */
export interface CodeCellData {
  code: string;
  startedAt: string;
  executionCount: number | null;
  events: CodeEventData[];
}

/** What a cell did, whole. */
export interface Execution {
  results: CodeResultData[];
  logs: { stdout: string[]; stderr: string[] };
  error: CodeErrorData | null;
  /** The cell's value as text (its main result's `text/plain`), if it had one. */
  text: string | null;
  contextId: string | null;
  executionCount: number | null;
  durationMs: number | null;
}

export interface RunCodeOptions {
  /** A context (or its id); by default the language's default context (`python`). */
  context?: string | { id: string };
  language?: CodeLanguage;
  /** Environment variables for this cell only. */
  env?: Record<string, string>;
  /** The cell is interrupted past this (default 300 000). */
  timeoutMs?: number;
  /** Aborting interrupts the cell in the sandbox; the kernel and its state stay. */
  signal?: AbortSignal;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  onResult?: (result: CodeResultData) => void;
  onError?: (error: CodeErrorData) => void;
}

/** How much longer than the cell's own timeout the request may take: the sandbox may resume first. */
const requestSlackMs = 120_000;

/**
 * Starts a cell: resolves once the sandbox took it (a refusal, such as an unknown context, throws
 * here), with its events to iterate as they come. A broken stream throws while iterating (the
 * sandbox's own breaks arrive as an `error` event first).
 */
export async function codeEvents(
  t: Transport,
  base: string,
  code: string,
  opts: Omit<RunCodeOptions, `on${string}`> = {},
): Promise<AsyncIterable<CodeEventData>> {
  const body: Record<string, unknown> = { code };
  if (opts.context !== undefined) body.contextId = typeof opts.context === 'string' ? opts.context : opts.context.id;
  if (opts.language !== undefined) body.language = opts.language;
  if (opts.env !== undefined) body.env = opts.env;
  if (opts.timeoutMs !== undefined) body.timeoutMs = opts.timeoutMs;
  const res = await t.request('POST', `${base}/code/run`, {
    json: body,
    timeoutMs: (opts.timeoutMs ?? 300_000) + requestSlackMs,
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  return (async function* () {
    try {
      yield* eventLines(res);
    } catch (err) {
      if (opts.signal?.aborted) throw new SpaceClientError('ABORTED', 'the cell was aborted (and interrupted in the sandbox)');
      throw new SpaceClientError('NETWORK', `the cell's stream broke off: ${(err as Error).message}`);
    }
  })();
}

/** Runs a cell and collects its events into an Execution, calling the callbacks as they come. */
export async function runCode(t: Transport, base: string, code: string, opts: RunCodeOptions = {}): Promise<Execution> {
  const execution: Execution = {
    results: [],
    logs: { stdout: [], stderr: [] },
    error: null,
    text: null,
    contextId: null,
    executionCount: null,
    durationMs: null,
  };
  let ended = false;
  for await (const event of await codeEvents(t, base, code, opts)) {
    switch (event.type) {
      case 'stdout':
      case 'stderr':
        execution.logs[event.type].push(event.text);
        (event.type === 'stdout' ? opts.onStdout : opts.onStderr)?.(event.text);
        break;
      case 'result': {
        const result = { isMainResult: event.isMainResult, data: event.data };
        execution.results.push(result);
        if (result.isMainResult && typeof result.data['text/plain'] === 'string') execution.text = result.data['text/plain'];
        opts.onResult?.(result);
        break;
      }
      case 'error':
        execution.error = { name: event.name, value: event.value, traceback: event.traceback };
        opts.onError?.(execution.error);
        break;
      case 'end':
        Object.assign(execution, { contextId: event.contextId, executionCount: event.executionCount, durationMs: event.durationMs });
        ended = true;
    }
  }
  // A stream cut below (the sandbox died) says so in an error event; without even that, the client says it.
  if (!ended && !execution.error) throw new SpaceClientError('PROTOCOL', 'the cell ended without its end event');
  return execution;
}

async function* eventLines(res: Response): AsyncGenerator<CodeEventData> {
  if (!res.body) return;
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line) yield JSON.parse(line) as CodeEventData;
    }
  }
}

/** A session's code contexts: `session.codeContexts.create({language: 'python'})`. */
export class CodeContexts {
  constructor(
    private readonly t: Transport,
    private readonly base: string,
  ) {}

  async create(opts: CallOptions & { language?: CodeLanguage; cwd?: string } = {}): Promise<CodeContextData> {
    const { language, cwd, ...call } = opts;
    return this.t.json<CodeContextData>('POST', `${this.base}/code/contexts`, {
      ...call,
      json: { ...(language ? { language } : {}), ...(cwd ? { cwd } : {}) },
    });
  }

  async list(opts: CallOptions = {}): Promise<CodeContextData[]> {
    return (await this.t.json<{ contexts: CodeContextData[] }>('GET', `${this.base}/code/contexts`, opts)).contexts;
  }

  async get(id: string, opts: CallOptions = {}): Promise<CodeContextData> {
    return this.t.json<CodeContextData>('GET', this.path(id), opts);
  }

  /** A new kernel in the context: its state is gone, its id stays. */
  async restart(id: string, opts: CallOptions = {}): Promise<CodeContextData> {
    return this.t.json<CodeContextData>('POST', `${this.path(id)}/restart`, opts);
  }

  /** The context's newest cells with their output (what the console's notebook view shows). */
  async history(id: string, opts: CallOptions = {}): Promise<CodeCellData[]> {
    return (await this.t.json<{ cells: CodeCellData[] }>('GET', `${this.path(id)}/history`, opts)).cells;
  }

  async delete(id: string, opts: CallOptions = {}): Promise<void> {
    await this.t.json('DELETE', this.path(id), opts);
  }

  private path(id: string): string {
    return `${this.base}/code/contexts/${encodeURIComponent(id)}`;
  }
}
