import { existsSync, readFileSync, readdirSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where the control plane serves the console. */
export const consolePath = '/console';

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
};

/**
 * The console's files as built by scripts/build-console.mjs (no CDN: everything it loads is here).
 * Only these are served: read once at start into memory (a few hundred KB), so no request names a path on disk.
 */
function loadAssets(dir: string): Map<string, Buffer> {
  const assets = new Map<string, Buffer>();
  if (!existsSync(dir)) return assets;
  for (const name of readdirSync(dir)) if (contentTypes[path.extname(name)]) assets.set(name, readFileSync(path.join(dir, name)));
  return assets;
}

/**
 * The web console under `/console`: its page and assets, with headers that keep it to itself (no
 * framing, no scripts or connections but its own). It signs in with an API key and calls the
 * public API like any client.
 */
export function createConsoleHandler(
  dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist-app'),
): (req: IncomingMessage, res: ServerResponse) => void {
  const assets = loadAssets(dir);
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://console.invalid');
    const name = url.pathname === consolePath || url.pathname === `${consolePath}/` ? 'index.html' : url.pathname.slice(`${consolePath}/`.length);
    const body = assets.get(name);
    const headers = {
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
      'content-security-policy': "default-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
    };
    if ((req.method !== 'GET' && req.method !== 'HEAD') || !body) {
      const missing = assets.size === 0 ? 'the console is not built (npm run build)' : `no console file ${JSON.stringify(name)}`;
      res.writeHead(req.method === 'GET' || req.method === 'HEAD' ? 404 : 405, { ...headers, 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: req.method === 'GET' || req.method === 'HEAD' ? 'ROUTE_NOT_FOUND' : 'METHOD_NOT_ALLOWED', message: missing } }));
      return;
    }
    res.writeHead(200, { ...headers, 'content-type': contentTypes[path.extname(name)]!, 'cache-control': name === 'index.html' ? 'no-cache' : 'max-age=300' });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
}
