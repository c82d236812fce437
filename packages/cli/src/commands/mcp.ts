import type { Command } from 'commander';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { cliClient } from '../client.js';
import { registerSpaceTools } from '@space/mcp';

/** mcp: an MCP server on stdin/stdout that drives SPACE sessions with the caller's API key. */
export function registerMcpCommand(program: Command): void {
  program
    .command('mcp')
    .description('serve SPACE to an MCP client on stdin/stdout (SPACE_API_URL and SPACE_API_KEY say where and as whom)')
    .action(async () => {
      const server = new McpServer({ name: 'space', version: '0.1.0' });
      registerSpaceTools(server, cliClient(process.env));
      await server.connect(new StdioServerTransport());
    });
}
