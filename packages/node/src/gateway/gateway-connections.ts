import type { Socket } from 'node:net';
import type { SandboxSource } from './egress-gateway.js';

/** A connection that passes no byte either way for this long is closed (an upgraded one: `upgradedIdleMs`). */
const idleTimeoutMs = 120_000;
/** How long an upgraded connection (a WebSocket) may pass no byte either way before it is closed. */
export const upgradedIdleMs = 10 * 60_000;
/**
 * New names one sandbox may have certificates being issued for at once (each is an `openssl` run;
 * the CA bounds them for all sandboxes together, this keeps one from taking all of that). Any
 * number of handshakes may wait on a name already being issued, or on names already issued.
 */
const maxIssuingPerSandbox = 8;

/** An upgraded connection's idle timeout, on it and (for TLS) on the TCP connection under it, which `accept` gave the shorter one. */
export function idleAsUpgraded(socket: Socket): void {
  const tcp = (socket as Socket & { _parent?: Socket })._parent;
  for (const s of tcp ? [socket, tcp] : [socket]) s.setTimeout(upgradedIdleMs, () => socket.destroy());
}

/**
 * The gateway's TCP connections, by the sandbox each comes from: only sandboxes' are taken (the
 * gateway listens on every address, for the redirected links), each with an idle timeout, a
 * bounded number of certificates being issued per sandbox, all closed with their sandbox and at
 * stop (the HTTP servers stop tracking upgraded ones), all reset around its full checkpoints.
 */
export class GatewayConnections {
  private readonly bySandbox = new Map<string, Set<Socket>>();
  private readonly sandboxOf = new WeakMap<Socket, string>();
  /** Names whose certificate is being issued, by the sandbox whose handshakes wait on them. */
  private readonly issuing = new Map<string, Set<string>>();
  /** Sandboxes being fully checkpointed: their new connections are reset. */
  private readonly cutting = new Set<string>();

  constructor(private readonly sourceOf: (ip: string) => SandboxSource | null) {}

  /** Takes a new connection, or destroys it at once (not a sandbox's). */
  accept(socket: Socket): boolean {
    const source = this.sourceOf((socket.remoteAddress ?? '').replace(/^::ffff:/, ''));
    if (!source) {
      socket.destroy();
      return false;
    }
    const { sandboxId } = source;
    if (this.cutting.has(sandboxId)) {
      socket.resetAndDestroy();
      return false;
    }
    let open = this.bySandbox.get(sandboxId);
    if (!open) this.bySandbox.set(sandboxId, (open = new Set()));
    open.add(socket);
    this.sandboxOf.set(socket, sandboxId);
    socket.setTimeout(idleTimeoutMs, () => socket.destroy());
    socket.once('close', () => {
      open.delete(socket);
      if (open.size === 0 && this.bySandbox.get(sandboxId) === open) this.bySandbox.delete(sandboxId);
    });
    return true;
  }

  /**
   * Runs `issue`, the certificate for a new `name` asked for by a handshake on `tcp`, unless that
   * connection's sandbox already waits on `maxIssuingPerSandbox` other new names: then it fails.
   */
  async issueFor<T>(tcp: Socket, name: string, issue: () => Promise<T>): Promise<T> {
    const sandboxId = this.sandboxOf.get(tcp);
    if (sandboxId === undefined) throw new Error('not a sandbox connection');
    let names = this.issuing.get(sandboxId);
    if (!names) this.issuing.set(sandboxId, (names = new Set()));
    if (names.has(name)) return issue(); // the CA issues each name once; this one joins it
    if (names.size >= maxIssuingPerSandbox) throw new Error(`this sandbox already waits on ${maxIssuingPerSandbox} new certificates`);
    names.add(name);
    try {
      return await issue();
    } finally {
      names.delete(name);
      if (names.size === 0 && this.issuing.get(sandboxId) === names) this.issuing.delete(sandboxId);
    }
  }

  /**
   * Resets the sandbox's connections, and every new one until the returned function is called (a
   * full checkpoint: runsc would cut them at the save, see the agent's outside_connections.go). A
   * reset, not a close: the sandbox's side is gone at once, and its process sees ECONNRESET.
   */
  cutSandbox(sandboxId: string): () => void {
    this.cutting.add(sandboxId);
    for (const socket of this.bySandbox.get(sandboxId) ?? []) socket.resetAndDestroy();
    return () => this.cutting.delete(sandboxId);
  }

  closeSandbox(sandboxId: string): void {
    for (const socket of this.bySandbox.get(sandboxId) ?? []) socket.destroy();
    this.bySandbox.delete(sandboxId);
  }

  closeAll(): void {
    for (const sandboxId of [...this.bySandbox.keys()]) this.closeSandbox(sandboxId);
  }
}
