import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/** How long the daemon waits for the node agent to close the connection that asked to quiesce. */
const quiesceCloseWaitMs = 1000;
/** How long a connection the daemon is done with waits for the peer to close it before it is reset. */
const peerCloseWaitMs = 2000;

/**
 * The daemon's listening socket and its connections. This runsc cannot save a sandbox that holds a
 * TCP endpoint (listening, connected or in TIME_WAIT), so before a full checkpoint the daemon closes
 * its own: the listener, and every connection reset (RST, which leaves no TIME_WAIT behind). It
 * listens again when the node agent sends SIGUSR2, after the checkpoint or after a restore.
 */
export class DaemonChannel {
  private readonly connections = new Set<Socket>();
  private readonly streams = new Set<Socket>();
  private listening = false;
  /** Holds the process open while nothing else does (no listener, no connection, no child). */
  private keepAlive: NodeJS.Timeout | null = null;

  constructor(
    private readonly server: Server,
    private readonly port: number,
  ) {
    server.on('connection', (socket: Socket) => {
      this.connections.add(socket);
      socket.once('close', () => this.connections.delete(socket));
      neverCloseFirst(socket);
    });
    server.on('upgrade', (req) => {
      const socket = req.socket as Socket;
      this.streams.add(socket);
      socket.once('close', () => this.streams.delete(socket));
    });
    process.on('SIGUSR2', () => void this.listen());
  }

  listen(): Promise<void> {
    if (this.listening) return Promise.resolve();
    this.listening = true;
    if (this.keepAlive) clearInterval(this.keepAlive);
    this.keepAlive = null;
    return new Promise((resolve) => this.server.listen(this.port, '0.0.0.0', resolve));
  }

  /**
   * Why the sandbox cannot be fully checkpointed now; empty when it can. Attached streams would be
   * cut (a client would lose its live output), and TCP sockets of user processes cannot be saved.
   */
  blockers(): string[] {
    const reasons: string[] = [];
    if (this.streams.size > 0) reasons.push(`${this.streams.size} stream(s) attached (exec, PTY, attach or watch)`);
    const sockets = userTcpSockets(this.port);
    if (sockets.length > 0) reasons.push(`processes in the sandbox hold TCP sockets: ${sockets.slice(0, 5).join(', ')}${sockets.length > 5 ? ', ...' : ''}`);
    return reasons;
  }

  /**
   * Stops listening and resets every connection but `asking`, the one carrying the request. All of
   * it happens before the answer goes out, so the node agent never races a listener still open.
   * `asking` is reset (its descriptor closed) when the node agent half-closes it after reading the
   * answer, so the reset it receives proves the daemon released it: a socket still open when the
   * runtime saves the sandbox is restored closed yet still registered with the event loop's epoll,
   * which then reports it for ever (the daemon spun on a CPU after such a restore).
   */
  quiesce(asking: Socket): void {
    this.listening = false;
    this.keepAlive = setInterval(() => undefined, 60_000);
    for (const socket of this.connections) if (socket !== asking) socket.resetAndDestroy();
    // Only the listener: http.Server#close would also end idle connections gracefully, and a
    // connection this side closes first lingers in TIME_WAIT.
    NetServer.prototype.close.call(this.server);
    asking.prependListener('end', () => asking.resetAndDestroy());
    const timer = setTimeout(() => asking.resetAndDestroy(), quiesceCloseWaitMs);
    asking.once('close', () => clearTimeout(timer));
  }
}

/**
 * Makes the daemon the passive side of every TCP close: a graceful `end` waits for the peer's FIN
 * (and resets if it does not come), and `destroy` resets. The side that closes first keeps the
 * connection in TIME_WAIT for a minute, which would block full checkpoints of this sandbox.
 */
function neverCloseFirst(socket: Socket): void {
  const end = socket.end.bind(socket);
  const destroy = socket.destroy.bind(socket);
  socket.end = ((...args: unknown[]) => {
    if (socket.readableEnded) return (end as (...a: unknown[]) => Socket)(...args);
    const [chunk] = args;
    if (chunk !== undefined && chunk !== null && typeof chunk !== 'function') socket.write(chunk as Buffer | string);
    // Wait for the peer to close first; reset if it does not.
    const timer = setTimeout(() => socket.resetAndDestroy(), peerCloseWaitMs);
    socket.once('end', () => {
      clearTimeout(timer);
      end();
    });
    socket.once('close', () => clearTimeout(timer));
    return socket;
  }) as Socket['end'];
  socket.destroy = ((error?: Error) => {
    if (socket.readableEnded || socket.destroyed || (socket as Socket & { resetAndClosing?: boolean }).resetAndClosing) return destroy(error);
    socket.destroy = destroy;
    return socket.resetAndDestroy();
  }) as Socket['destroy'];
}

const tcpStates: Record<string, string> = {
  '01': 'ESTABLISHED',
  '02': 'SYN_SENT',
  '03': 'SYN_RECV',
  '04': 'FIN_WAIT1',
  '05': 'FIN_WAIT2',
  '06': 'TIME_WAIT',
  '07': 'CLOSE',
  '08': 'CLOSE_WAIT',
  '09': 'LAST_ACK',
  '0A': 'LISTEN',
  '0B': 'CLOSING',
};

/** TCP sockets in the sandbox other than the daemon's own (from gVisor's /proc/net/tcp and tcp6). */
export function userTcpSockets(daemonPort: number): string[] {
  const found: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 4) continue;
      const localPort = parseInt(fields[1]!.split(':')[1] ?? '', 16);
      if (localPort === daemonPort) continue;
      found.push(`${tcpStates[fields[3]!] ?? fields[3]} port ${localPort}`);
    }
  }
  return found;
}
