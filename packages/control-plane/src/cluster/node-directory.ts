import { ErrorCode, SpaceError, type NodeHeartbeat, type NodeHeartbeatReply, type NodeStatus, type NodeView } from '@space/protocol';
import { type ClientTls, SingleFlight } from '@space/server-kit';
import { HeartbeatWrites } from './heartbeat-writes.js';
import { NodeClient } from './node-client.js';
import { plainNodeApiRefusal } from './plain-node-api.js';
import type { SecretCipher } from '../store/secret-cipher.js';
import type { NodeRow, SessionRow, Store } from '../store/store.js';

export interface NodeDirectoryOptions {
  store: Store;
  /** Seals node tokens in the store, as secret values are. */
  cipher: SecretCipher;
  /** No heartbeat for this long and a node is lost (`SPACE_NODE_LOST_AFTER_SEC`, default 10 s). */
  lostAfterMs: number;
  now?: () => number;
  /** How long a heartbeat's row waits to be written with others' (default `heartbeatWriteWindowMs`). */
  heartbeatWriteWindowMs?: number;
  /** Makes the client of a node (tests give a fake node's). */
  connect?: (nodeId: string, url: string, token: string) => NodeClient;
  /** For node APIs served over `https://`: the cluster CA (PEM) they are checked against, and the client certificate presented to them. */
  nodeTls?: ClientTls;
  /** Take nodes whose API is plain HTTP on a network address (`SPACE_ALLOW_PLAIN_NODE_API`); loopback ones always are. */
  allowPlainNodeApi?: boolean;
}

/**
 * Whether node `nodeId` may run a sandbox of the session `row`: it exists and its volume is there
 * (rows from before nodes were recorded have no volume node: wherever they run). A node that came
 * back after its sessions moved must stop theirs.
 */
export function mayRunOn(row: Pick<SessionRow, 'volumeNodeId'> | null, nodeId: string): boolean {
  return row !== null && (row.volumeNodeId ?? nodeId) === nodeId;
}

/** Nodes a sweep or a maintenance pass asks at once: a slow node holds up only itself. */
export const nodesAskedAtOnce = 16;

/** How long a node's client is used before its row is read again (a new URL or token takes effect within it). */
const clientTtlMs = 2000;

/**
 * How long placement uses one read of the nodes and their active sessions: a node lost meanwhile
 * may still be given a session (its start fails), and a drain waits this long after it marks its
 * node draining, so no control plane places a session there after the drain listed them.
 */
export const placementViewMs = 1000;

/** What placement decides from: the nodes and their active sessions (counted on by this control plane's placements) as read `at`. */
interface PlacementView {
  at: number;
  rows: NodeRow[];
  /**
   * By row: its last heartbeat in ms and its active sessions. A placement weighs every node: as
   * numbers, not dates parsed and maps looked up (at 1,000 nodes that was 12% of a control plane
   * filling its cluster).
   */
  heartbeatMs: number[];
  active: number[];
  ids: Set<string>;
}

/** `client` for calls about the session `row` is (at its placement), or as it is for a row of no session. */
function placed(client: NodeClient, row: Partial<Pick<SessionRow, 'id' | 'placementEpoch'>>): NodeClient {
  return row.id?.startsWith('ses_') && row.placementEpoch !== undefined ? client.placedAt({ sessionId: row.id, epoch: row.placementEpoch }) : client;
}

/**
 * The cluster's nodes, as their heartbeats registered them in the store: which client reaches a
 * node, which nodes are lost, and where a new session goes. Every control plane reads the same
 * rows, so any of them routes any session.
 */
export class NodeDirectory {
  /**
   * Each node's client, with the URL and token (as opened, and as sealed in its row) it was made
   * for, when its row was last read, and how many connections it had failed to open then.
   */
  private readonly clients = new Map<string, { url: string; token: string; sealedToken: string; client: NodeClient; at: number; failedConnections: number }>();
  /** Each node's token as this control plane last sealed it: a heartbeat with the same token writes the same sealed value, not a new one. */
  private readonly sealedTokens = new Map<string, { token: string; sealed: string }>();
  private readonly heartbeats: HeartbeatWrites;
  private readonly now: () => number;
  private view: PlacementView | null = null;
  private readonly viewRead = new SingleFlight<PlacementView>();
  /** The node this control plane was configured with (`space up`, `SPACE_NODE_URL`), once it said its id. */
  private configuredNodeId: string | null = null;

  constructor(private readonly options: NodeDirectoryOptions) {
    this.now = options.now ?? Date.now;
    this.heartbeats = new HeartbeatWrites(options.store, options.heartbeatWriteWindowMs);
  }

  /** The configured node: rows from before nodes were recorded live there, and it stays eligible for new sessions while it is alone. */
  setConfiguredNode(nodeId: string): void {
    this.configuredNodeId = nodeId;
  }

  /** Registers or refreshes a node; of the sessions a joining node sent, names those it must not run. */
  async heartbeat(beat: NodeHeartbeat): Promise<NodeHeartbeatReply> {
    const plain = plainNodeApiRefusal(beat.url, this.options.allowPlainNodeApi ?? false);
    if (plain) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `node ${beat.id}: ${plain}`);
    if (beat.fenceAfterMs !== undefined && beat.fenceAfterMs >= this.options.lostAfterMs)
      throw new SpaceError(
        ErrorCode.VALIDATION_FAILED,
        `node ${beat.id} fences itself after ${beat.fenceAfterMs / 1000} s without a heartbeat acknowledged (SPACE_NODE_FENCE_AFTER_SEC), not before this control plane finds it lost after ${this.options.lostAfterMs / 1000} s (SPACE_NODE_LOST_AFTER_SEC): lower the first or raise the second`,
      );
    await this.heartbeats.write({
      id: beat.id,
      url: beat.url,
      token: this.sealedToken(beat.id, beat.token),
      capacity: beat.capacity,
      storage: beat.storage ?? 'ok',
      sandboxes: beat.sandboxes,
      lastHeartbeatAt: new Date(this.now()).toISOString(),
    });
    // A node heard at a new address (restarted elsewhere, or on another port): its client reads the row again at the next call.
    const cached = this.clients.get(beat.id);
    if (cached && cached.url !== beat.url) cached.at = Number.NEGATIVE_INFINITY;
    // A node new to this control plane's placement view is seen by the next placement.
    if (this.view && !this.view.ids.has(beat.id)) this.view = null;
    // A joining node names every session it runs: read 500 to a statement, not one by one.
    const named = beat.sessions ?? [];
    const rows = new Map((await this.options.store.findSessions(named)).map((r) => [r.id, r]));
    const stop = named.filter((sessionId) => !mayRunOn(rows.get(sessionId) ?? null, beat.id));
    for (const sessionId of stop) await this.recordCutOffEnd(sessionId, beat);
    return { ok: true, stop };
  }

  private sealedToken(nodeId: string, token: string): string {
    const known = this.sealedTokens.get(nodeId);
    if (known?.token === token) return known.sealed;
    const sealed = this.options.cipher.seal(token);
    this.sealedTokens.set(nodeId, { token, sealed });
    return sealed;
  }

  /**
   * A session moved off this node while it was cut off, and the node now stops its copy there: the
   * copy's history said `lost` from when the session moved, and gets when it really stopped acting,
   * the node's fence (paused: nothing ran after) or, a node that did not fence, now.
   */
  private async recordCutOffEnd(sessionId: string, beat: NodeHeartbeat): Promise<void> {
    const now = new Date(this.now()).toISOString();
    const end = beat.fencedSince
      ? {
          endedAt: beat.fencedSince,
          reason: 'fenced',
          note: `cut off from every control plane, paused by its node's fence at ${beat.fencedSince} and stopped at ${now} when the node was heard again`,
        }
      : { endedAt: now, reason: 'cut-off', note: `cut off from every control plane, it ran on until its node was heard again at ${now}` };
    await this.options.store.correctSandboxEnd(sessionId, beat.id, end);
  }

  status(row: NodeRow): NodeStatus {
    return this.statusAt(row, Date.parse(row.lastHeartbeatAt), this.now());
  }

  private statusAt(row: NodeRow, heartbeatMs: number, now: number): NodeStatus {
    return now - heartbeatMs > this.options.lostAfterMs ? 'lost' : row.status;
  }

  /** How many nodes are in each status: from their rows alone (`list` also counts each node's sessions, a read of every session). */
  async countByStatus(): Promise<Record<NodeStatus, number>> {
    const counts: Record<NodeStatus, number> = { ready: 0, draining: 0, lost: 0 };
    for (const row of await this.options.store.listNodes()) counts[this.status(row)]++;
    return counts;
  }

  async list(): Promise<NodeView[]> {
    const [rows, load] = await Promise.all([this.options.store.listNodes(), this.options.store.loadByNode()]);
    return rows.map((row) => ({
      id: row.id,
      url: row.url,
      status: this.status(row),
      sessions: load.get(row.id)?.sessions ?? 0,
      sandboxes: row.sandboxes,
      capacity: row.capacity,
      storage: row.storage,
      registeredAt: row.registeredAt,
      lastHeartbeatAt: row.lastHeartbeatAt,
    }));
  }

  /**
   * Whether the node is lost (no heartbeat for the lost period) or not registered at all. Never the
   * configured node: this process beats for it from its health, which can lag under load.
   */
  async isLost(nodeId: string): Promise<boolean> {
    if (nodeId === this.configuredNodeId) return false;
    const row = await this.options.store.getNode(nodeId);
    return !row || this.status(row) === 'lost';
  }

  /**
   * Ends the calls this control plane waits on lost nodes for; by node, how many. A node cut off by
   * a network that drops its packets, or frozen, never answers them, and no timeout of their own
   * ends them (a checkpoint may take minutes): a lifecycle operation waiting on one keeps the
   * session's turn, its lease renewed, and the session could never move. They fail with
   * NODE_UNAVAILABLE, as when a node dies. Only nodes whose calls have waited `silentMs` without any
   * answer are looked at (a live node answers some call now and then), in one read of the nodes.
   */
  async cutCallsToLost(silentMs = 0): Promise<Map<string, number>> {
    const cut = new Map<string, number>();
    const now = performance.now();
    const waiting = [...this.clients].filter(
      ([nodeId, { client }]) => nodeId !== this.configuredNodeId && client.waitingCalls() > 0 && client.silentMs(now) >= silentMs,
    );
    if (waiting.length === 0) return cut;
    const rows = new Map((await this.options.store.listNodes()).map((row) => [row.id, row]));
    for (const [nodeId, { client }] of waiting) {
      const row = rows.get(nodeId);
      if (row && this.status(row) !== 'lost') continue;
      const why = row ? `no heartbeat for ${Math.round((this.now() - Date.parse(row.lastHeartbeatAt)) / 1000)} s` : 'no longer registered';
      const calls = client.cutWaiting(`node ${nodeId} was found lost (${why}) while this call waited for its answer`);
      if (calls > 0) cut.set(nodeId, calls);
    }
    return cut;
  }

  /** The client of node `nodeId`; NODE_UNAVAILABLE when no such node registered. */
  async client(nodeId: string): Promise<NodeClient> {
    const cached = this.clients.get(nodeId);
    // A client that could not connect since its row was read reads it again at once: a restarted node listens on a new address.
    if (cached && this.now() - cached.at < clientTtlMs && cached.client.failedConnections() === cached.failedConnections) return cached.client;
    const row = await this.options.store.getNode(nodeId);
    if (!row) throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, `node ${nodeId} is not registered with the control plane`);
    return this.clientOf(row);
  }

  /**
   * The node holding a session's volume (rows from before nodes were recorded: the configured node),
   * for calls naming the session's placement as `row` has it (a template version's row names none).
   */
  async forVolume(row: { volumeNodeId: string | null } & Partial<Pick<SessionRow, 'id' | 'placementEpoch'>>): Promise<NodeClient> {
    const nodeId = row.volumeNodeId ?? this.configuredNodeId;
    if (!nodeId) throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, 'the session has no node and this control plane has no default node');
    return placed(await this.client(nodeId), row);
  }

  /** The node running the session's sandbox, or holding its volume when none runs, for calls naming its placement. */
  async forSandbox(row: { nodeId: string | null; volumeNodeId: string | null } & Partial<Pick<SessionRow, 'id' | 'placementEpoch'>>): Promise<NodeClient> {
    return row.nodeId ? placed(await this.client(row.nodeId), row) : this.forVolume(row);
  }

  /**
   * Where a new session's volume goes: `onNode` when it must be there (its checkpoint or template is
   * there), else the ready node serving the fewest sessions for its size. NODE_UNAVAILABLE when none
   * is ready.
   */
  async place(onNode: string | null = null): Promise<NodeClient> {
    if (onNode) {
      const row = await this.options.store.getNode(onNode);
      const status = row ? this.status(row) : 'lost';
      if (!row || status === 'lost')
        throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, `node ${onNode}, which holds what the session starts from, is ${row ? 'lost' : 'not registered'}`);
      return this.clientOf(row);
    }
    const { rows, heartbeatMs, active } = await this.placementView();
    const now = this.now();
    // The ready node with the fewest active sessions per GiB of its memory (bigger nodes take more); the first of equals.
    // A node whose storage is low or read-only would refuse the session: passed by.
    let best = -1;
    let bestWeight = Number.POSITIVE_INFINITY;
    for (let i = 0; i < rows.length; i++) {
      if (this.statusAt(rows[i], heartbeatMs[i], now) !== 'ready' || rows[i].storage !== 'ok') continue;
      const weight = (active[i] * 1024) / rows[i].capacity.memoryMb;
      if (weight < bestWeight) {
        best = i;
        bestWeight = weight;
      }
    }
    // The configured node stays eligible while no other is: a slow health answer must not stop `space up` from creating sessions.
    if (best < 0) best = rows.findIndex((r) => r.id === this.configuredNodeId && r.status === 'ready');
    if (best < 0) {
      // Read again next time: a node that registers now is taken at once.
      this.view = null;
      throw new SpaceError(
        ErrorCode.NODE_UNAVAILABLE,
        `no node is ready (${rows.length} registered: ${rows.map((r) => `${r.id} ${this.status(r)}${r.storage === 'ok' ? '' : ` (storage ${r.storage})`}`).join(', ') || 'none'})`,
      );
    }
    // Counted here at once: the next placements of this view spread over the nodes.
    active[best]++;
    return this.clientOf(rows[best]);
  }

  /**
   * The nodes and their active sessions, read at most every `placementViewMs` (creations at once
   * share one read): placement costs no statement per create, and counts its own placements until
   * the next read. Those of other control planes meanwhile are seen at that read.
   */
  private async placementView(): Promise<PlacementView> {
    if (this.view && this.now() - this.view.at < placementViewMs) return this.view;
    return this.viewRead.run('view', async () => {
      const [rows, active] = await Promise.all([this.options.store.listNodes(), this.options.store.activeByNode()]);
      this.view = {
        at: this.now(),
        rows,
        heartbeatMs: rows.map((r) => Date.parse(r.lastHeartbeatAt)),
        active: rows.map((r) => active.get(r.id) ?? 0),
        ids: new Set(rows.map((r) => r.id)),
      };
      return this.view;
    });
  }

  /** Every node that is not lost, for sweeps (reconciliation, orphans, metrics). */
  async live(): Promise<NodeClient[]> {
    const rows = await this.options.store.listNodes();
    return rows.filter((r) => this.status(r) !== 'lost').map((r) => this.clientOf(r));
  }

  async setStatus(nodeId: string, status: NodeRow['status']): Promise<NodeView> {
    if (!(await this.options.store.getNode(nodeId))) throw new SpaceError(ErrorCode.NODE_NOT_FOUND, `no node ${JSON.stringify(nodeId)}`);
    await this.options.store.setNodeStatus(nodeId, status);
    this.view = null;
    return (await this.list()).find((n) => n.id === nodeId)!;
  }

  close(): void {
    for (const { client } of this.clients.values()) client.close();
    this.clients.clear();
  }

  private clientOf(row: NodeRow): NodeClient {
    const cached = this.clients.get(row.id);
    // Opened only when its sealed form changed: each control plane seals a node's token with a nonce of
    // its own, and a token sealed anew but the same must not cost calls in flight their client.
    const token = cached?.url === row.url && cached.sealedToken === row.token ? cached.token : this.options.cipher.open(row.token);
    if (cached?.url === row.url && cached.token === token) {
      Object.assign(cached, { sealedToken: row.token, at: this.now(), failedConnections: cached.client.failedConnections() });
      return cached.client;
    }
    cached?.client.close();
    const connect = this.options.connect ?? ((id, url, secret) => new NodeClient(id, url, secret, this.options.nodeTls));
    const client = connect(row.id, row.url, token);
    this.clients.set(row.id, { url: row.url, token, sealedToken: row.token, client, at: this.now(), failedConnections: client.failedConnections() });
    return client;
  }
}
