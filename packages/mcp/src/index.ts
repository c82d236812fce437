export { registerSpaceTools } from './tools.js';
export { createMcpHttpApi, mcpPath, type McpHttpOptions } from './mcp-http.js';
