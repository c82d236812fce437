import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Space } from '@space/sdk';
import { z } from 'zod';
import { ok, run, sessionId } from './tool-results.js';

/** The largest screenshot sent as an image (base64); past it the tool says to ask for a smaller scale. */
const maxScreenshotBase64 = 4 * 1024 * 1024;

const coordinate = z.number().int().min(0).max(7680);

/**
 * Computer use for MCP clients, on sessions of the `desktop` template: see the screen (an MCP
 * image), click, type, press keys, start applications.
 */
export function registerDesktopTools(server: McpServer, space: Space): void {
  const desktop = (id: string) => space.sessions.handle(id).desktop;
  server.registerTool(
    'screenshot',
    {
      description:
        "A screenshot of the session's desktop (template desktop) as an image. `scale` (0.05-1) makes it smaller; coordinates for click stay the screen's own.",
      inputSchema: { sessionId, scale: z.number().min(0.05).max(1).optional() },
    },
    ({ sessionId: id, scale }) =>
      run(async () => {
        const [png, state] = await Promise.all([desktop(id).screenshot(scale === undefined ? {} : { scale }), desktop(id).state()]);
        const data = png.toString('base64');
        if (data.length > maxScreenshotBase64)
          return { isError: true, content: [{ type: 'text', text: `the screenshot is ${data.length} base64 bytes: ask again with a smaller scale` }] };
        return {
          content: [
            { type: 'text', text: `screen ${state.width}x${state.height}${scale === undefined ? '' : `, shown at scale ${scale}`}` },
            { type: 'image', data, mimeType: 'image/png' },
          ],
        };
      }),
  );
  server.registerTool(
    'click',
    {
      description: 'Click on the desktop at x, y (screen pixels): left by default, or right or middle; double: a double click.',
      inputSchema: { sessionId, x: coordinate, y: coordinate, button: z.enum(['left', 'middle', 'right']).optional(), double: z.boolean().optional() },
    },
    ({ sessionId: id, x, y, button, double }) =>
      run(async () => {
        await desktop(id).click(x, y, { ...(button ? { button } : {}), double: double ?? false });
        return ok(`clicked at ${x},${y}`);
      }),
  );
  server.registerTool(
    'type',
    {
      description: 'Type text into the focused window of the desktop.',
      inputSchema: { sessionId, text: z.string().min(1).max(10_000) },
    },
    ({ sessionId: id, text }) =>
      run(async () => {
        await desktop(id).type(text);
        return ok(`typed ${text.length} characters`);
      }),
  );
  server.registerTool(
    'key',
    {
      description: 'Press keys on the desktop, one chord after another, as X names them: Return, Escape, Tab, ctrl+c, ctrl+shift+t, F5, alt+Left.',
      inputSchema: { sessionId, keys: z.array(z.string().min(1).max(100)).min(1).max(50) },
    },
    ({ sessionId: id, keys }) =>
      run(async () => {
        await desktop(id).key(keys);
        return ok(`pressed ${keys.join(' ')}`);
      }),
  );
  server.registerTool(
    'launch',
    {
      description: "Start an application on the session's desktop: chromium (with a url), terminal, or any command (cmd, an argv).",
      inputSchema: {
        sessionId,
        app: z.enum(['chromium', 'terminal']).optional(),
        url: z.string().min(1).max(4096).optional(),
        cmd: z.array(z.string().max(4096)).min(1).max(100).optional(),
      },
    },
    ({ sessionId: id, app, url, cmd }) =>
      run(async () => {
        if ((app === undefined) === (cmd === undefined)) throw new Error('give app or cmd, not both');
        const started = cmd ? await desktop(id).launch({ cmd }) : await desktop(id).launch(app!, url);
        return ok(started);
      }),
  );
}
