import { Agent } from 'node:http';
import type { Socket } from 'node:net';
import { resetAgentSockets } from '@space/server-kit';

/**
 * The node's own connections into one sandbox: proxied requests (kept alive in a pool of the
 * sandbox's own) and upgraded ones (WebSockets). A full checkpoint resets them all first: runsc
 * would cut them at the save anyway, and a process waiting on one with epoll would then not be told
 * of its listening socket again after a restore (see the agent's outside_connections.go).
 */
export class InboundConnections {
  readonly agent = new Agent({ keepAlive: true, timeout: 30_000 });
  private readonly upgraded = new Set<Socket>();

  track(socket: Socket): void {
    this.upgraded.add(socket);
    socket.once('close', () => this.upgraded.delete(socket));
  }

  /** Resets every connection: the sandbox's side closes at once, leaving no endpoint to cut. */
  reset(): void {
    resetAgentSockets(this.agent);
    for (const socket of this.upgraded) socket.resetAndDestroy();
  }

  close(): void {
    this.agent.destroy();
    for (const socket of this.upgraded) socket.destroy();
  }
}
