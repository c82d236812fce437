import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import {
  ErrorCode,
  type CreateJoinTokenRequest,
  type JoinToken,
  type NodeCertificateReply,
  type NodeCertificateRequest,
  type NodeJoinReply,
  type NodeJoinRequest,
  SpaceError,
  defaultJoinTokenTtlSec,
} from '@space/protocol';
import { bearerToken } from '@space/server-kit';
import type { Store } from '../store/store.js';
import { type Authenticator, hashKey } from './auth.js';
import type { ClusterCa } from './cluster-ca.js';

export interface NodeCredentialsDeps {
  store: Store;
  auth: Authenticator;
  /** The cluster CA (`SPACE_CLUSTER_CA_DIR`) that signs node APIs' certificates; null: nodes serve plain HTTP. */
  ca: ClusterCa | null;
  /** Milliseconds since the epoch. */
  now: () => number;
  log: (message: string) => void;
}

/** Who sent a heartbeat: a node with its own credential, or someone with the admin key. */
export type HeartbeatSender = { nodeId: string } | { admin: true };

/** The prefixes of join tokens and node credentials: neither is an API key, and neither reaches a tenant's routes. */
const joinTokenPrefix = 'snj_';
const credentialPrefix = 'snc_';

/**
 * Nodes' own credentials, so that the admin key never leaves the control planes: an operator makes a
 * one-time join token (`space node join-token`), a new node trades it for its credential (kept in
 * its data dir), and heartbeats with that credential, which names one node and reaches no other
 * route. Revoking it refuses the node's heartbeats: the node fences itself and is found lost.
 */
export class NodeCredentials {
  /** Nodes already warned about for heartbeating with the admin key (once each per process). */
  private readonly warnedAdmin = new Set<string>();

  constructor(private readonly deps: NodeCredentialsDeps) {}

  async createJoinToken({ ttlSec = defaultJoinTokenTtlSec, uses = 1 }: CreateJoinTokenRequest = {}): Promise<JoinToken> {
    const token = `${joinTokenPrefix}${randomBytes(24).toString('base64url')}`;
    const now = this.deps.now();
    const expiresAt = new Date(now + ttlSec * 1000).toISOString();
    await this.deps.store.insertNodeJoinToken({ hash: hashKey(token), createdAt: new Date(now).toISOString(), expiresAt, uses });
    return { token, expiresAt, uses };
  }

  async join(request: NodeJoinRequest): Promise<NodeJoinReply> {
    if (request.csr && !request.hosts)
      throw new SpaceError(ErrorCode.VALIDATION_FAILED, 'hosts: the names the control planes reach the node by, for its certificate');
    const at = new Date(this.deps.now()).toISOString();
    const use = await this.deps.store.useNodeJoinToken(hashKey(request.joinToken), request.nodeId, at);
    if (use.outcome !== 'used') {
      const why =
        use.outcome === 'unknown'
          ? 'no such join token'
          : use.outcome === 'expired'
            ? `the join token expired at ${use.expiresAt}`
            : use.uses === 1
              ? `the join token was used by node ${use.usedBy} at ${use.usedAt}, and this join token is used once`
              : `the join token's ${use.uses} uses are spent (the last by node ${use.usedBy} at ${use.usedAt})`;
      this.deps.log(`node ${request.nodeId} may not join: ${why}`);
      throw new SpaceError(ErrorCode.UNAUTHORIZED, `${why}: make a new one with "space node join-token" (admin key)`);
    }
    // After the token (which a bad request then uses up): no one without one makes this side sign anything.
    const { ca } = this.deps;
    const tls =
      ca && request.csr ? { certificate: await ca.issueNodeCertificate(request.nodeId, request.csr, request.hosts!), caCertificate: ca.certificate } : {};
    const credential = `${credentialPrefix}${randomBytes(32).toString('base64url')}`;
    await this.deps.store.putNodeCredential({ nodeId: request.nodeId, hash: hashKey(credential), createdAt: at });
    this.deps.log(
      `node ${request.nodeId} joined with a join token; its heartbeats carry its own credential from now on${tls.certificate ? `, and its API a certificate of the cluster CA for ${request.hosts!.join(', ')}` : ''}`,
    );
    return { nodeId: request.nodeId, credential, ...tls };
  }

  /** A new certificate for a joined node's API (its own credential only), before its old one expires. */
  async renewCertificate(sender: HeartbeatSender, request: NodeCertificateRequest): Promise<NodeCertificateReply> {
    if (!('nodeId' in sender))
      throw new SpaceError(
        ErrorCode.FORBIDDEN,
        "a node API's certificate is renewed with that node's own credential, not the admin key: join the node with a join token",
      );
    if (sender.nodeId !== request.nodeId) {
      this.deps.log(`refused a certificate for node ${request.nodeId} asked with the credential of node ${sender.nodeId}`);
      throw new SpaceError(ErrorCode.FORBIDDEN, `this credential is node ${sender.nodeId}'s: it renews that node's certificate only, not ${request.nodeId}'s`);
    }
    const { ca } = this.deps;
    if (!ca) throw new SpaceError(ErrorCode.VALIDATION_FAILED, 'this control plane has no cluster CA (SPACE_CLUSTER_CA_DIR): there is no certificate to renew');
    const certificate = await ca.issueNodeCertificate(request.nodeId, request.csr, request.hosts);
    this.deps.log(`renewed the node API certificate of node ${request.nodeId} for ${request.hosts.join(', ')}`);
    return { certificate, caCertificate: ca.certificate };
  }

  async revoke(nodeId: string): Promise<{ nodeId: string; revoked: boolean }> {
    const revoked = await this.deps.store.revokeNodeCredential(nodeId, new Date(this.deps.now()).toISOString());
    if (revoked) this.deps.log(`revoked the credential of node ${nodeId}: its heartbeats are refused from now on`);
    return { nodeId, revoked };
  }

  /** Who a heartbeat request comes from: a node's valid credential, or the admin key (any other key is refused). */
  async senderOf(req: IncomingMessage): Promise<HeartbeatSender> {
    const key = bearerToken(req);
    if (!key?.startsWith(credentialPrefix)) {
      this.deps.auth.requireAdmin(await this.deps.auth.authenticate(req));
      return { admin: true };
    }
    const row = await this.deps.store.findNodeCredential(hashKey(key));
    if (!row) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'unknown node credential: give the node a new join token (space node join-token)');
    if (row.revokedAt) {
      this.deps.log(`refused a heartbeat of node ${row.nodeId}: its credential was revoked at ${row.revokedAt}`);
      throw new SpaceError(
        ErrorCode.UNAUTHORIZED,
        `the credential of node ${row.nodeId} was revoked at ${row.revokedAt}: to bring the node back, delete its SPACE_DATA_DIR/node/credential and start it with a new SPACE_NODE_JOIN_TOKEN`,
      );
    }
    return { nodeId: row.nodeId };
  }

  /**
   * The admin key, or node `nodeId`'s own credential: a node drains itself as its pod stops (and
   * takes sessions again as it starts) without holding the admin key. `what` names the action.
   */
  async requireAdminOrNode(req: IncomingMessage, nodeId: string, what: string): Promise<void> {
    const sender = await this.senderOf(req);
    if ('nodeId' in sender && sender.nodeId !== nodeId) {
      this.deps.log(`refused to ${what} node ${nodeId} asked with the credential of node ${sender.nodeId}`);
      throw new SpaceError(ErrorCode.FORBIDDEN, `this credential is node ${sender.nodeId}'s: it may ${what} that node only, not ${nodeId}`);
    }
  }

  /** Refuses a heartbeat for a node other than the credential's. */
  checkSender(sender: HeartbeatSender, nodeId: string): void {
    if ('nodeId' in sender) {
      if (sender.nodeId === nodeId) return;
      this.deps.log(`refused a heartbeat for node ${nodeId} sent with the credential of node ${sender.nodeId}`);
      throw new SpaceError(ErrorCode.FORBIDDEN, `this credential is node ${sender.nodeId}'s: it heartbeats for that node only, not ${nodeId}`);
    }
    if (this.warnedAdmin.has(nodeId)) return;
    this.warnedAdmin.add(nodeId);
    this.deps.log(
      `node ${nodeId} heartbeats with the admin key: give it a join token instead (space node join-token; SPACE_NODE_JOIN_TOKEN), so the admin key stays on the control planes`,
    );
  }
}
