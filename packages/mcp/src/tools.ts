import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Execution, Space } from '@space/sdk';
import { z } from 'zod';
import { registerDesktopTools } from './desktop-tools.js';
import { ok, run, sessionId } from './tool-results.js';

/** What a tool returns at most of a command's output or a file, per stream: an agent's context is small. */
const maxTextBytes = 64 * 1024;

function bounded(text: string): string {
  if (Buffer.byteLength(text) <= maxTextBytes) return text;
  return `${Buffer.from(text).subarray(0, maxTextBytes).toString('utf8')}\n[… cut at ${maxTextBytes} bytes]`;
}

/** Images a run_code answer carries at most, and the largest (base64): the rest are named, not sent. */
const maxImages = 4;
const maxImageBase64 = 4 * 1024 * 1024;

/** A cell's execution as MCP content: its text (bounded) first, then its images. */
function cellContent(execution: Execution): CallToolResult {
  const text: string[] = [];
  const images: CallToolResult['content'] = [];
  if (execution.logs.stdout.length) text.push(`stdout:\n${bounded(execution.logs.stdout.join(''))}`);
  if (execution.logs.stderr.length) text.push(`stderr:\n${bounded(execution.logs.stderr.join(''))}`);
  for (const result of execution.results) {
    const image = (['image/png', 'image/jpeg'] as const).find((mime) => typeof result.data[mime] === 'string');
    const data = image ? (result.data[image] as string) : '';
    if (image && images.length < maxImages && data.length <= maxImageBase64) images.push({ type: 'image', data, mimeType: image });
    else if (image) text.push(`[an ${image} of ${data.length} base64 bytes not sent]`);
    const plain = result.data['text/plain'];
    if (typeof plain === 'string' && (!image || result.isMainResult)) text.push(`${result.isMainResult ? 'value' : 'display'}:\n${bounded(plain)}`);
  }
  if (execution.error) text.push(`error: ${execution.error.name}: ${execution.error.value}\n${bounded(execution.error.traceback.join('\n'))}`);
  return { isError: execution.error !== null, content: [{ type: 'text', text: text.join('\n\n') || '(no output)' }, ...images] };
}

const path = z.string().min(1).max(4096).describe('a path in the sandbox; relative paths are under /workspace');

/**
 * SPACE's tools for MCP clients: sessions, commands, files, checkpoints, fork, restore, egress and
 * the desktop (desktop-tools.ts), each one call of the SDK with the caller's API key.
 */
export function registerSpaceTools(server: McpServer, space: Space): void {
  server.registerTool(
    'create_session',
    {
      description: 'Create a session: a sandbox whose files and processes survive its death (it resumes on the next call). Returns its id.',
      inputSchema: {
        template: z.string().max(32).optional().describe('base (Debian with Python, the default), tiny (busybox) or a template of yours'),
        env: z.record(z.string().max(4096)).optional().describe('environment variables of its commands'),
      },
    },
    ({ template, env }) => run(async () => ok((await space.sessions.create({ template, env })).data)),
  );
  server.registerTool('list_sessions', { description: 'List your sessions with their status.' }, () =>
    run(async () =>
      ok((await space.sessions.list()).map((s) => ({ id: s.id, status: s.data.status, template: s.data.template, createdAt: s.data.createdAt }))),
    ),
  );
  server.registerTool('delete_session', { description: 'Delete a session with its files and checkpoints.', inputSchema: { sessionId } }, ({ sessionId: id }) =>
    run(async () => {
      await space.sessions.handle(id).delete();
      return ok(`deleted ${id}`);
    }),
  );
  server.registerTool(
    'run_command',
    {
      description: 'Run a shell command in the session and wait for it. Returns exit code, stdout and stderr (each cut at 64 KiB).',
      inputSchema: {
        sessionId,
        command: z.string().min(1).max(100_000).describe('run by sh -c'),
        cwd: z.string().max(4096).optional(),
        timeoutMs: z.number().int().min(1).max(600_000).optional().describe('default 60000'),
      },
    },
    ({ sessionId: id, command, cwd, timeoutMs }) =>
      run(async () => {
        const result = await space.sessions.handle(id).exec(command, { cwd, timeoutMs });
        return ok({ exitCode: result.exitCode, timedOut: result.timedOut ?? false, stdout: bounded(result.stdout), stderr: bounded(result.stderr) });
      }),
  );
  server.registerTool(
    'run_code',
    {
      description:
        "Run a cell of Python (or JavaScript, or bash) in the session's code interpreter (template code-interpreter): variables stay between cells and survive the sandbox's death. Returns stdout, stderr, the cell's value and error as text, and charts as images.",
      inputSchema: {
        sessionId,
        code: z.string().min(1).max(1_000_000),
        contextId: z.string().max(64).optional().describe("a context made for this (default: the language's own)"),
        language: z.enum(['python', 'javascript', 'bash']).optional(),
        timeoutMs: z.number().int().min(1).max(600_000).optional().describe('default 300000'),
      },
    },
    ({ sessionId: id, code, contextId, language, timeoutMs }) =>
      run(async () => {
        const execution = await space.sessions.handle(id).runCode(code, { context: contextId, language, timeoutMs });
        return cellContent(execution);
      }),
  );
  server.registerTool(
    'read_file',
    { description: 'Read a text file of the session (cut at 64 KiB).', inputSchema: { sessionId, path } },
    ({ sessionId: id, path: p }) => run(async () => ok(bounded((await space.sessions.handle(id).files.read(p)).toString('utf8')))),
  );
  server.registerTool(
    'write_file',
    { description: 'Write a text file in the session (directories are created).', inputSchema: { sessionId, path, content: z.string().max(10_000_000) } },
    ({ sessionId: id, path: p, content }) => run(async () => ok(await space.sessions.handle(id).files.write(p, content))),
  );
  server.registerTool('list_files', { description: 'List a directory of the session.', inputSchema: { sessionId, path } }, ({ sessionId: id, path: p }) =>
    run(async () => ok((await space.sessions.handle(id).files.list(p)).map((e) => ({ name: e.name, type: e.type, size: e.size })))),
  );
  server.registerTool(
    'checkpoint',
    {
      description: 'Checkpoint the session: fs (its files, copy-on-write) or full (also memory and running processes). Returns the checkpoint id.',
      inputSchema: { sessionId, kind: z.enum(['fs', 'full']).optional() },
    },
    ({ sessionId: id, kind }) => run(async () => ok(await space.sessions.handle(id).checkpoint({ kind }))),
  );
  server.registerTool(
    'fork',
    {
      description: 'Start new sessions from a checkpoint, to try strategies side by side. Returns their ids.',
      inputSchema: { checkpointId: z.string().min(1).max(64), count: z.number().int().min(1).max(16).optional() },
    },
    ({ checkpointId, count }) => run(async () => ok((await space.checkpoints.fork(checkpointId, { count })).map((s) => s.id))),
  );
  server.registerTool(
    'restore',
    {
      description: "Reset a session to a checkpoint of its lineage (its own, an ancestor's, or a fork's: keep the winner).",
      inputSchema: { sessionId, checkpointId: z.string().min(1).max(64) },
    },
    ({ sessionId: id, checkpointId }) =>
      run(async () => {
        await space.sessions.handle(id).restore(checkpointId);
        return ok(`${id} restored to ${checkpointId}`);
      }),
  );
  server.registerTool(
    'diff_checkpoints',
    {
      description:
        'What changed between two checkpoints of one lineage (a session, its forks), or from a checkpoint to the session\'s files now (toCheckpointId "live"): each path added, removed, modified, renamed or mode-changed. Answers in milliseconds whatever the session size.',
      inputSchema: { fromCheckpointId: z.string().min(1).max(64), toCheckpointId: z.string().min(1).max(64).describe('a checkpoint id, or "live"') },
    },
    ({ fromCheckpointId, toCheckpointId }) =>
      run(async () => {
        const diff = await space.checkpoints.diff(fromCheckpointId, toCheckpointId, { limit: 200 });
        const lines = diff.entries.map((e) => `${e.change} ${e.path}${e.from ? ` (from ${e.from})` : ''}`);
        return ok(bounded([...lines, ...(diff.next ? [`[… more after ${diff.next}]`] : [])].join('\n') || 'no differences'));
      }),
  );
  server.registerTool(
    'restore_path',
    {
      description:
        "Put one file or directory back as it was in a checkpoint of the session's lineage, into the running session (processes keep running). A checkpoint is taken first: restore it to undo.",
      inputSchema: { sessionId, checkpointId: z.string().min(1).max(64), path: z.string().min(1).max(4096), to: z.string().min(1).max(4096).optional() },
    },
    ({ sessionId: id, checkpointId, path, to }) =>
      run(async () => ok(await space.sessions.handle(id).files.restore(checkpointId, path, to === undefined ? {} : { to }))),
  );
  server.registerTool(
    'kill_sandbox',
    { description: "Kill only the session's sandbox; the next call resumes the session.", inputSchema: { sessionId } },
    ({ sessionId: id }) =>
      run(async () => {
        await space.sessions.handle(id).killSandbox();
        return ok(`killed the sandbox of ${id}`);
      }),
  );
  server.registerTool(
    'set_egress',
    {
      description: 'Set what the session may reach outside: allow-all, deny-all, or an allow-list of domains (*.example.com) and CIDRs.',
      inputSchema: {
        sessionId,
        mode: z.enum(['allow-all', 'deny-all', 'allow-list']),
        domains: z.array(z.string().max(253)).max(256).optional(),
        cidrs: z.array(z.string().max(64)).max(256).optional(),
      },
    },
    ({ sessionId: id, mode, domains, cidrs }) =>
      run(async () => ok((await space.sessions.handle(id).setEgress({ mode, domains: domains ?? [], cidrs: cidrs ?? [] })).data.egress)),
  );
  registerDesktopTools(server, space);
}
