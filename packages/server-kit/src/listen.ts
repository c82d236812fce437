import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Router } from './router.js';

/** Starts an HTTP server for a router; resolves once it listens (port 0 picks a free port). */
export async function listen(router: Router, host: string, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer({ requestTimeout: 0, keepAliveTimeout: 30_000 }, (req, res) => void router.handle(req, res));
  server.on('upgrade', (req, socket, head) => void router.handleUpgrade(req, socket, head));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}

export async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
