import type { Agent } from 'node:http';
import type { Socket } from 'node:net';

/** Aborts every connection of an HTTP agent (in use or idle) with a TCP reset: the peer keeps no endpoint of them, not even TIME_WAIT. */
export function resetAgentSockets(agent: Agent): void {
  for (const pool of [agent.sockets, agent.freeSockets]) {
    for (const sockets of Object.values(pool)) for (const socket of sockets ?? []) (socket as Socket).resetAndDestroy();
  }
}
