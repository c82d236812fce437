import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Api } from './client.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

type ToolResult = { isError?: boolean; content: { type: string; text: string }[] };

/** `space mcp` (stdio) and the control plane's `/mcp` (Streamable HTTP), driven by the MCP SDK's own client. */
describe('MCP server', () => {
  let platform: RunningPlatform;
  let admin: Api;
  const sessions: string[] = [];

  platformForSuite(sessions, (p, a) => ((platform = p), (admin = a)));

  test('sessions, commands, files, checkpoint, fork and errors as tool errors with our codes', { timeout: 180_000 }, async () => {
    const { id: tenantId } = (await admin.call('POST', '/v1/tenants', { name: 'mcp' })).body;
    const key = (await admin.call('POST', '/v1/keys', { tenantId })).body.key as string;
    const client = new Client({ name: 'space-test', version: '0.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [cliMain, 'mcp'],
        env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: key } as Record<string, string>,
      }),
    );
    const call = async (name: string, args: Record<string, unknown> = {}): Promise<ToolResult> =>
      (await client.callTool({ name, arguments: args })) as ToolResult;
    const text = (result: ToolResult): string => result.content.map((c) => c.text).join('');
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name).sort();
      assert.deepEqual(tools, [
        'checkpoint',
        'click',
        'create_session',
        'delete_session',
        'diff_checkpoints',
        'fork',
        'key',
        'kill_sandbox',
        'launch',
        'list_files',
        'list_sessions',
        'read_file',
        'restore',
        'restore_path',
        'run_code',
        'run_command',
        'screenshot',
        'set_egress',
        'type',
        'write_file',
      ]);

      const created = JSON.parse(text(await call('create_session', { template: 'tiny' })));
      sessions.push(created.id);
      assert.equal(created.status, 'running');
      const ran = JSON.parse(text(await call('run_command', { sessionId: created.id, command: 'echo $((6*7)); echo oops >&2; exit 3' })));
      assert.deepEqual([ran.exitCode, ran.stdout, ran.stderr], [3, '42\n', 'oops\n']);
      const flood = JSON.parse(text(await call('run_command', { sessionId: created.id, command: 'yes | head -c 300000' })));
      assert.ok(flood.stdout.length < 70_000 && flood.stdout.endsWith('bytes]'), 'output is bounded');

      assert.equal((await call('write_file', { sessionId: created.id, path: 'notes/plan.txt', content: 'step 1\n' })).isError, undefined);
      assert.equal(text(await call('read_file', { sessionId: created.id, path: 'notes/plan.txt' })), 'step 1\n');
      assert.match(text(await call('list_files', { sessionId: created.id, path: 'notes' })), /plan\.txt/);

      const checkpoint = JSON.parse(text(await call('checkpoint', { sessionId: created.id })));
      const [forked] = JSON.parse(text(await call('fork', { checkpointId: checkpoint.id })));
      sessions.push(forked);
      assert.equal(text(await call('read_file', { sessionId: forked, path: 'notes/plan.txt' })), 'step 1\n');
      assert.match(text(await call('kill_sandbox', { sessionId: forked })), /killed/);
      assert.equal(JSON.parse(text(await call('run_command', { sessionId: forked, command: 'cat notes/plan.txt' }))).stdout, 'step 1\n');
      assert.match(text(await call('set_egress', { sessionId: forked, mode: 'deny-all' })), /deny-all/);
      assert.equal((await call('write_file', { sessionId: created.id, path: 'notes/plan.txt', content: 'step 2\n' })).isError, undefined);
      const later = JSON.parse(text(await call('checkpoint', { sessionId: created.id })));
      assert.match(
        text(await call('diff_checkpoints', { fromCheckpointId: checkpoint.id, toCheckpointId: later.id })),
        /^modified \/workspace\/notes\/plan\.txt$/m,
      );
      assert.equal(JSON.parse(text(await call('restore_path', { sessionId: created.id, checkpointId: checkpoint.id, path: 'notes/plan.txt' }))).files, 1);
      assert.equal(text(await call('read_file', { sessionId: created.id, path: 'notes/plan.txt' })), 'step 1\n');
      assert.match(text(await call('restore', { sessionId: created.id, checkpointId: checkpoint.id })), /restored/);
      assert.equal(JSON.parse(text(await call('list_sessions'))).length, 2);

      // Errors are tool errors that name our code; input outside the schema is refused by the server.
      const missing = await call('run_command', { sessionId: 'ses_nothere0000', command: 'true' });
      assert.equal(missing.isError, true);
      assert.match(text(missing), /^SESSION_NOT_FOUND: /);
      const badInput = await call('fork', { checkpointId: checkpoint.id, count: 99 });
      assert.equal(badInput.isError, true);
      assert.match(text(await call('delete_session', { sessionId: forked })), /deleted/);
    } finally {
      await client.close();
    }
  });

  test('Streamable HTTP at /mcp: the same tools with the caller key; a bad key is refused at the door; tenants stay apart', { timeout: 120_000 }, async () => {
    const keyOf = async (name: string): Promise<string> => {
      const { id: tenantId } = (await admin.call('POST', '/v1/tenants', { name })).body;
      return (await admin.call('POST', '/v1/keys', { tenantId })).body.key as string;
    };
    const connect = async (key: string): Promise<Client> => {
      const client = new Client({ name: 'space-test-http', version: '0.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${platform.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
      return client;
    };
    const [mine, theirs] = await Promise.all([connect(await keyOf('mcp-http')), connect(await keyOf('mcp-http-other'))]);
    const call = async (client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> =>
      (await client.callTool({ name, arguments: args })) as ToolResult;
    const text = (result: ToolResult): string => result.content.map((c) => c.text).join('');
    try {
      assert.equal((await mine.listTools()).tools.length, 20);
      const created = JSON.parse(text(await call(mine, 'create_session', { template: 'tiny' })));
      const ran = JSON.parse(text(await call(mine, 'run_command', { sessionId: created.id, command: 'echo over-http > f; cat f' })));
      assert.deepEqual([ran.exitCode, ran.stdout], [0, 'over-http\n']);
      assert.equal(text(await call(mine, 'read_file', { sessionId: created.id, path: 'f' })), 'over-http\n');
      assert.deepEqual(JSON.parse(text(await call(theirs, 'list_sessions'))), [], 'another tenant sees none of them');
      const foreign = await call(theirs, 'run_command', { sessionId: created.id, command: 'true' });
      assert.deepEqual([foreign.isError, text(foreign).split(':')[0]], [true, 'SESSION_NOT_FOUND']);
      assert.match(text(await call(mine, 'delete_session', { sessionId: created.id })), /deleted/);
    } finally {
      await mine.close();
      await theirs.close();
    }
    const raw = (init: RequestInit) => fetch(`${platform.url}/mcp`, init);
    const initialize = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
    });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const badKey = await raw({ method: 'POST', headers: { ...headers, authorization: 'Bearer sk_not_a_key' }, body: initialize });
    assert.equal(badKey.status, 401);
    assert.match((await badKey.json()).error.message, /UNAUTHORIZED/);
    assert.equal((await raw({ method: 'POST', headers, body: initialize })).status, 401, 'no key');
    assert.equal((await raw({ method: 'GET', headers })).status, 405);
  });
});
