import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Api } from './client.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

type ToolResult = { isError?: boolean; content: { type: string; text: string }[] };

/** `space mcp` driven by the MCP SDK's own client over stdio, as an MCP client would. */
describe('MCP server (stdio)', () => {
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
        'create_session',
        'delete_session',
        'fork',
        'kill_sandbox',
        'list_files',
        'list_sessions',
        'read_file',
        'restore',
        'run_command',
        'set_egress',
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
});
