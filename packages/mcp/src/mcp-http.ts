import type { IncomingMessage, ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Limits, isSpaceError } from '@space/protocol';
import { Space } from '@space/sdk';
import { bearerToken, readBody } from '@space/server-kit';
import { registerSpaceTools } from './tools.js';

/** Where the control plane serves MCP over Streamable HTTP. */
export const mcpPath = '/mcp';

export interface McpHttpOptions {
  /** SPACE's own API, which the tools call with the caller's key (the control plane's URL, loopback). */
  apiUrl: () => string;
  /** Throws (UNAUTHORIZED) for a key that is not one: refused at the door, not at the first tool call. */
  checkKey: (req: IncomingMessage) => Promise<unknown>;
}

/** A JSON-RPC error reply, the shape MCP clients read from any failed HTTP exchange. */
function sendRpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/**
 * MCP over Streamable HTTP, stateless: each POST is answered by a server made for it with the
 * caller's key (`Authorization: Bearer <key>`), so any control plane answers any request and
 * nothing is kept between them. The tools are those of `space mcp` (stdio).
 */
export function createMcpHttpApi(options: McpHttpOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return async (req, res) => {
    // Stateless: no server-initiated stream to GET, no session to DELETE.
    if (req.method !== 'POST') return sendRpcError(res, 405, -32000, `${req.method} is not served: POST JSON-RPC messages to ${mcpPath}`, { allow: 'POST' });
    const key = bearerToken(req);
    try {
      if (!key) throw new Error('missing API key: send "Authorization: Bearer <key>"');
      await options.checkKey(req);
    } catch (err) {
      return sendRpcError(res, 401, -32001, isSpaceError(err) ? `${err.code}: ${err.message}` : (err as Error).message, { 'www-authenticate': 'Bearer' });
    }
    let message: unknown;
    try {
      message = JSON.parse((await readBody(req, Limits.maxJsonBodyBytes)).toString('utf8'));
    } catch (err) {
      return sendRpcError(res, isSpaceError(err) ? err.status : 400, -32700, isSpaceError(err) ? err.message : 'the body is not JSON');
    }
    const server = new McpServer({ name: 'space', version: '0.1.0' });
    // A 429 goes back to the MCP client as a tool error naming it, not waited out in the server.
    registerSpaceTools(server, new Space({ apiUrl: options.apiUrl(), apiKey: key!, retry: false }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.once('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, message);
  };
}
