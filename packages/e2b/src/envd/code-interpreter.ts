import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { Limits } from '@space/protocol';
import type { CodeContextData, CodeEventData, CodeLanguage, SessionHandle } from '@space/sdk';
import { readJson, sendJson } from '@space/server-kit';
import { E2bError, sendE2bError, toE2bError } from '../errors.js';
import { type SpaceFor, accessTokenHeader, sandboxSession } from './sandbox-access.js';

/** The port E2B's code-interpreter SDK names in `E2b-Sandbox-Port` for its Jupyter server. */
export const codeInterpreterPort = '49999';
/** Context calls carry the sandbox's traffic access token (SPACE's session token, as the envd one) instead of X-Access-Token. */
const trafficTokenHeader = 'e2b-traffic-access-token';

const ExecuteSchema = z
  .object({
    code: z.string(),
    context_id: z.string().max(64).nullish(),
    language: z.string().max(32).nullish(),
    env_vars: z.record(z.string()).nullish(),
  })
  .passthrough();
const CreateContextSchema = z.object({ language: z.string().max(32).nullish(), cwd: z.string().max(Limits.maxPathLength).nullish() }).passthrough();

/** E2B's names of MIME types in a result; other types keep their MIME name. A Map: a kernel's key such as `constructor` finds nothing. */
const e2bResultKeys: ReadonlyMap<string, string> = new Map([
  ['text/plain', 'text'],
  ['text/html', 'html'],
  ['text/markdown', 'markdown'],
  ['image/svg+xml', 'svg'],
  ['image/png', 'png'],
  ['image/jpeg', 'jpeg'],
  ['application/pdf', 'pdf'],
  ['text/latex', 'latex'],
  ['application/json', 'json'],
  ['application/javascript', 'javascript'],
]);

/**
 * The code interpreter as E2B's `@e2b/code-interpreter` SDK reaches it: requests to
 * `E2B_SANDBOX_URL` with `E2b-Sandbox-Port: 49999` (`POST /execute` answering E2B's JSON lines,
 * `/contexts`), translated onto SPACE's `/code/run` and `/code/contexts` with the sandbox's token.
 */
export async function serveCodeInterpreter(spaceFor: SpaceFor, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  try {
    const session = sandboxSession((name) => header(req, name === accessTokenHeader ? [accessTokenHeader, trafficTokenHeader] : [name]), spaceFor);
    const parts = path.split('/').filter(Boolean);
    if (req.method === 'POST' && path === '/execute') return await execute(session, req, res);
    if (parts[0] === 'contexts') {
      if (parts.length === 1 && req.method === 'GET') return sendJson(res, 200, (await session.codeContexts.list()).map(e2bContext));
      if (parts.length === 1 && req.method === 'POST') {
        const body = await readJson(req, CreateContextSchema);
        return sendJson(res, 200, e2bContext(await session.codeContexts.create({ language: language(body.language), ...(body.cwd ? { cwd: body.cwd } : {}) })));
      }
      if (parts.length === 2 && req.method === 'DELETE') return void (await session.codeContexts.delete(parts[1]!), res.writeHead(204).end());
      if (parts.length === 3 && parts[2] === 'restart' && req.method === 'POST')
        return void (await session.codeContexts.restart(parts[1]!), res.writeHead(204).end());
    }
    throw new E2bError(404, `${req.method} ${path.slice(0, 200)} is not a code interpreter route`);
  } catch (err) {
    if (!res.headersSent) sendE2bError(res, toE2bError(err));
    else res.destroy();
  }
}

async function execute(session: SessionHandle, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readJson(req, ExecuteSchema, Limits.maxCodeBytes + 64 * 1024);
  const abort = new AbortController();
  // The client left: the cell is interrupted in the sandbox.
  res.once('close', () => abort.abort());
  const events = await session.codeEvents(body.code, {
    ...(body.context_id ? { context: body.context_id } : { language: language(body.language) }),
    ...(body.env_vars ? { env: body.env_vars } : {}),
    signal: abort.signal,
  });
  res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
  res.flushHeaders();
  for await (const event of events) for (const line of e2bLines(event)) res.write(`${JSON.stringify(line)}\n`);
  res.end();
}

/** One SPACE code event as E2B's lines. */
export function e2bLines(event: CodeEventData): Record<string, unknown>[] {
  const timestamp = new Date().toISOString();
  switch (event.type) {
    case 'stdout':
    case 'stderr':
      return [{ type: event.type, text: event.text, timestamp }];
    case 'result': {
      // Own properties only (fromEntries defines them): a kernel's `__proto__` key stays a key.
      const data = Object.entries(event.data).map(([mime, value]) => [e2bResultKeys.get(mime) ?? mime, value]);
      return [{ ...Object.fromEntries(data), type: 'result', is_main_result: event.isMainResult }];
    }
    case 'error':
      return [{ type: 'error', name: event.name, value: event.value, traceback: event.traceback.join('\n') }];
    case 'end':
      return [{ type: 'number_of_executions', execution_count: event.executionCount }, { type: 'end_of_execution' }];
  }
}

function e2bContext(context: CodeContextData): Record<string, unknown> {
  return { id: context.id, language: context.language, cwd: context.cwd };
}

/** E2B's language names as SPACE's (`js` is `javascript`); SPACE refuses one it does not run, naming those it does. */
function language(name: string | null | undefined): CodeLanguage {
  const given = (name ?? 'python').toLowerCase();
  return (given === 'js' ? 'javascript' : given) as CodeLanguage;
}

function header(req: IncomingMessage, names: string[]): string | undefined {
  for (const name of names) {
    const value = req.headers[name];
    if (typeof value === 'string' && value) return value;
  }
  return undefined;
}
