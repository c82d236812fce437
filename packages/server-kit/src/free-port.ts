import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 now (for a server started next: a test's, or a local cluster member's). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
