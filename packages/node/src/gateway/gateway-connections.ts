import type { Socket } from 'node:net';
import type { SandboxSource } from './egress-gateway.js';

/** A connection that passes no byte either way for this long is closed (an upgraded one: `upgradedIdleMs`). */
const idleTimeoutMs = 120_000;
/** How long an upgraded connection (a WebSocket) may pass no byte either way before it is closed. */
export const upgradedIdleMs = 10 * 60_000;
/** TLS handshakes one sandbox may have under way at once: each may issue a certificate. */
const maxHandshakesPerSandbox = 8;

/** An upgraded connection's idle timeout, on it and (for TLS) on the TCP connection under it, which `accept` gave the shorter one. */
export function idleAsUpgraded(socket: Socket): void {
  const tcp = (socket as Socket & { _parent?: Socket })._parent;
  for (const s of tcp ? [socket, tcp] : [socket]) s.setTimeout(upgradedIdleMs, () => socket.destroy());
}

/**
 * The gateway's TCP connections, by the sandbox each comes from: only sandboxes' are taken (the
 * gateway listens on every address, for the redirected links), each with an idle timeout, a
 * bounded number of TLS handshakes per sandbox, all closed with their sandbox and at stop (the
 * HTTP servers stop tracking upgraded ones).
 */
export class GatewayConnections {
  private readonly bySandbox = new Map<string, Set<Socket>>();
  /** TLS handshakes under way, by sandbox, and the sandbox of each connection still in its handshake. */
  private readonly handshakes = new Map<string, number>();
  private readonly handshaking = new WeakMap<Socket, string>();

  constructor(private readonly sourceOf: (ip: string) => SandboxSource | null) {}

  /** Takes a new connection, or destroys it at once (not a sandbox's, or past its handshake bound). */
  accept(socket: Socket, tls: boolean): boolean {
    const source = this.sourceOf((socket.remoteAddress ?? '').replace(/^::ffff:/, ''));
    if (!source || (tls && (this.handshakes.get(source.sandboxId) ?? 0) >= maxHandshakesPerSandbox)) {
      socket.destroy();
      return false;
    }
    const { sandboxId } = source;
    let open = this.bySandbox.get(sandboxId);
    if (!open) this.bySandbox.set(sandboxId, (open = new Set()));
    open.add(socket);
    socket.setTimeout(idleTimeoutMs, () => socket.destroy());
    if (tls) {
      this.handshakes.set(sandboxId, (this.handshakes.get(sandboxId) ?? 0) + 1);
      this.handshaking.set(socket, sandboxId);
    }
    socket.once('close', () => {
      this.handshakeDone(socket);
      open.delete(socket);
      if (open.size === 0 && this.bySandbox.get(sandboxId) === open) this.bySandbox.delete(sandboxId);
    });
    return true;
  }

  /** The TLS handshake of `socket` (the TCP one) ended. */
  handshakeDone(socket: Socket): void {
    const sandboxId = this.handshaking.get(socket);
    if (sandboxId === undefined) return;
    this.handshaking.delete(socket);
    const left = (this.handshakes.get(sandboxId) ?? 1) - 1;
    if (left > 0) this.handshakes.set(sandboxId, left);
    else this.handshakes.delete(sandboxId);
  }

  closeSandbox(sandboxId: string): void {
    for (const socket of this.bySandbox.get(sandboxId) ?? []) socket.destroy();
    this.bySandbox.delete(sandboxId);
  }

  closeAll(): void {
    for (const sandboxId of [...this.bySandbox.keys()]) this.closeSandbox(sandboxId);
  }
}
