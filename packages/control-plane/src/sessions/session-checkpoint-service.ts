import { ErrorCode, SpaceError, isSpaceError, type Checkpoint, type CheckpointKind, type SecretGrant, type Session } from '@space/protocol';
import type { EgressService } from '../tenants/egress-service.js';
import type { CheckpointTaker } from '../checkpoints/checkpoint-taker.js';
import type { VolumeService } from './volume-service.js';
import type { CheckpointShipper } from '../checkpoints/checkpoint-shipper.js';
import type { Caller } from '../tenants/auth.js';
import type { Metrics } from '../metrics/metrics.js';
import { type NodeDirectory, nodesAskedAtOnce } from '../cluster/node-directory.js';
import { eachAtMost } from '@space/server-kit';
import type { SessionService } from './session-service.js';
import type { CheckpointRow, SessionRow, Store } from '../store/store.js';
import type { TenantLimits } from '../tenants/tenant-limits.js';

/** How far up a fork chain the lineage is followed (a bound against cycles in a damaged store). */
const maxLineageDepth = 256;

/** Why a full checkpoint became an fs one, by the error that refused it (the label in /metrics). */
const fallbackReasons = new Map<string, string>([
  [ErrorCode.FULL_CHECKPOINT_REFUSED, 'refused'],
  [ErrorCode.FULL_CHECKPOINT_FAILED, 'failed'],
  [ErrorCode.QUOTA_EXCEEDED, 'quota'],
]);

/** The control plane's side of checkpoints: sessions' checkpoints (filesystem and full), their lineage, forks from them and restores to them. */
export class SessionCheckpointService {
  constructor(
    private readonly store: Store,
    private readonly nodes: NodeDirectory,
    private readonly sessions: SessionService,
    private readonly taker: CheckpointTaker,
    private readonly metrics: Metrics,
    private readonly limits: Pick<TenantLimits, 'checkSessions' | 'checkCheckpointStorage'>,
    private readonly shipper: CheckpointShipper,
    private readonly volumes: Pick<VolumeService, 'planRestore' | 'restore'>,
    private readonly egress: Pick<EgressService, 'forkSecrets'>,
  ) {}

  /**
   * Takes a checkpoint. A full one the node refuses (a stream is attached, a connection with the
   * outside is open, no sandbox runs) or fails to take is replaced by an fs checkpoint, and the caller gets
   * the refusal with `details.fallbackCheckpointId`: the files are safe either way. So is one the
   * tenant's checkpoint storage has no room for.
   */
  async create(caller: Caller, sessionId: string, kind: CheckpointKind = 'fs', trigger: CheckpointRow['trigger'] = 'manual'): Promise<Checkpoint> {
    return this.sessions.inTurn(caller, sessionId, 'checkpoint', (session) => this.createLocked(session, kind, trigger));
  }

  /** An automatic checkpoint taken in the session's turn, the oldest automatic ones beyond `keep` pruned (a code cell's). */
  async createAutomatic(caller: Caller, sessionId: string, kind: CheckpointKind, keep: number): Promise<Checkpoint> {
    return this.sessions.inTurn(caller, sessionId, 'checkpoint', async (session) => {
      try {
        return await this.createLocked(session, kind, 'auto');
      } finally {
        await this.pruneLocked(session.id, keep);
      }
    });
  }

  /** `create` for a caller that holds the session's lifecycle queue (maintenance, in the session's turn). */
  async createLocked(session: SessionRow, kind: CheckpointKind, trigger: CheckpointRow['trigger']): Promise<Checkpoint> {
    try {
      if (kind === 'full') await this.limits.checkCheckpointStorage(session.tenantId, session.resources.memoryMb * 1024 ** 2);
      return toCheckpoint(await this.taker.take(session, kind, trigger));
    } catch (err) {
      if (kind !== 'full' || !isSpaceError(err) || !fallbackReasons.has(err.code)) throw err;
      this.metrics.inc('full_checkpoint_fallbacks', { reason: fallbackReasons.get(err.code)! });
      const fallback = await this.taker.take(session, 'fs', trigger);
      throw new SpaceError(err.code, `${err.message}; an fs checkpoint ${fallback.id} was taken instead`, {
        ...err.details,
        fallbackCheckpointId: fallback.id,
      });
    }
  }

  /**
   * Deletes automatic checkpoints beyond the newest `keep` of each kind, except those that sessions
   * were forked from: frequent fs checkpoints do not push out the rarer full ones. The caller holds
   * the session's lifecycle queue (maintenance, in the session's turn).
   */
  async pruneLocked(sessionId: string, keep: number): Promise<void> {
    for (const kind of ['fs', 'full'] as const) {
      const automatic = (await this.store.listCheckpoints(sessionId)).filter((c) => c.trigger === 'auto' && c.kind === kind);
      for (const old of automatic.slice(0, Math.max(0, automatic.length - keep))) {
        if (await this.store.isForkParent(old.id)) continue;
        await (await this.nodes.client(old.nodeId)).deleteCheckpoint(old.id);
        await this.store.deleteCheckpoint(old.id);
        await this.shipper.dropObjects(old);
      }
    }
  }

  /**
   * Deletes checkpoints on the nodes that the store does not know: left when a crash fell between a
   * node's snapshot and the store's record, or written late by a command a crashed node agent had
   * started. Checkpoints younger than `graceMs` are left alone: one may be on its way into the
   * store. Runs at start (grace 0 when this is the only control plane: nothing is in flight) and
   * from maintenance, on the nodes `ofNode` takes (a control plane's share), several at once. A
   * node that does not answer is left for the next sweep.
   */
  async removeOrphans(graceMs = 0, ofNode: (nodeId: string) => boolean = () => true): Promise<number> {
    let removed = 0;
    const nodes = (await this.nodes.live()).filter((node) => ofNode(node.nodeId));
    await eachAtMost(nodes, nodesAskedAtOnce, async (node) => {
      const listed = await node.listCheckpoints().catch(() => null);
      const old = (listed?.checkpoints ?? []).filter(({ createdAt }) => Date.now() - Date.parse(createdAt) >= graceMs).map((c) => c.id);
      const known = await this.store.knownCheckpoints(old);
      for (const id of old.filter((id) => !known.has(id))) {
        await node.deleteCheckpoint(id);
        removed++;
      }
    });
    return removed;
  }

  async list(caller: Caller, sessionId: string): Promise<Checkpoint[]> {
    const session = await this.sessions.row(caller, sessionId);
    return (await this.store.listCheckpoints(session.id)).map(toCheckpoint);
  }

  /**
   * `count` new sessions, each on its own writable snapshot of the checkpoint, with a parent link;
   * with the parent's secrets, or `secrets` instead (see `EgressService.forkSecrets`).
   */
  async fork(caller: Caller, checkpointId: string, count: number, secrets?: SecretGrant[]): Promise<Session[]> {
    const checkpoint = await this.checkpoint(caller, checkpointId);
    const parent = await this.sessions.row(caller, checkpoint.sessionId);
    // All or nothing: refused before any fork starts when they would not all fit.
    await this.limits.checkSessions(caller.tenantId, count);
    const forkSecrets = await this.egress.forkSecrets(parent, secrets);
    const request = {
      template: parent.template,
      env: parent.env,
      resources: parent.resources,
      metadata: parent.metadata,
      checkpointIntervalSec: parent.checkpointIntervalSec,
      fullCheckpointIntervalSec: parent.fullCheckpointIntervalSec,
      idleTimeoutSec: parent.idleTimeoutSec,
      onResume: parent.onResume,
      codeCheckpointDelayMs: parent.codeCheckpointDelayMs,
      // A fork lives until deleted unless it is given a timeout of its own.
      onTimeout: parent.onTimeout,
      services: parent.services,
      secrets: forkSecrets,
      egress: parent.egress,
      // The fork's volumes come from the checkpoint (copies of the read-write ones).
      volumes: [],
      publicPorts: parent.publicPorts,
    };
    // Started side by side; all or nothing: if one fork fails, the others are deleted again.
    const results = await Promise.allSettled(
      Array.from({ length: count }, () => this.sessions.create(caller, request, { checkpoint, cwd: parent.cwd, secrets: forkSecrets })),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    const forks = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    if (!failed) return forks;
    for (const fork of forks) await this.sessions.delete(caller, fork.id).catch(() => undefined);
    throw failed.reason;
  }

  /**
   * Resets a session to a checkpoint of its lineage: its own, an ancestor's it was forked from, or
   * one taken in a session forked from it ("keep the winner").
   */
  async restore(caller: Caller, sessionId: string, checkpointId: string, restoreVolumes = false): Promise<Session> {
    await this.checkpointInLineage(caller, await this.sessions.row(caller, sessionId), checkpointId);
    await this.sessions.inTurn(caller, sessionId, 'restore', async (session) => {
      // Checked again in the queue: what ran before may have deleted the checkpoint.
      const checkpoint = await this.checkpointInLineage(caller, session, checkpointId);
      const node = await this.nodes.forVolume(session);
      // Refused before anything changes when a volume cannot be put back.
      const volumePlan = restoreVolumes ? await this.volumes.planRestore(session, checkpoint) : null;
      // A checkpoint taken on another node (in a fork placed there) comes from the object store.
      await this.shipper.bringTo(node, checkpoint);
      if (session.sandboxId) await this.sessions.forgetSandbox(session, session.sandboxId, 'restored');
      await node.restoreVolume(session.id, checkpoint.id);
      if (volumePlan) await this.volumes.restore(volumePlan, node);
      await this.sessions.startSandbox({ ...session, sandboxId: null, status: 'stopped' }, { volumeReady: true });
    });
    return this.sessions.get(caller, sessionId);
  }

  /** The checkpoint, if it is in the session's lineage (CHECKPOINT_NOT_FOUND or CHECKPOINT_NOT_IN_LINEAGE otherwise). */
  async checkpointInLineage(caller: Caller, session: SessionRow, checkpointId: string): Promise<CheckpointRow> {
    const checkpoint = await this.checkpoint(caller, checkpointId);
    if (!(await this.family(caller, session.id)).has(checkpoint.sessionId)) {
      throw new SpaceError(
        ErrorCode.CHECKPOINT_NOT_IN_LINEAGE,
        `checkpoint ${checkpointId} belongs to session ${checkpoint.sessionId}, which is not related to ${session.id} by forks`,
      );
    }
    return checkpoint;
  }

  /** The tenant's checkpoint; another tenant's answers as one that does not exist. */
  async checkpoint(caller: Caller, checkpointId: string): Promise<CheckpointRow> {
    const checkpoint = await this.store.getCheckpoint(caller.tenantId, checkpointId);
    if (!checkpoint) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `no checkpoint ${JSON.stringify(checkpointId)}`);
    return checkpoint;
  }

  /** Both checkpoints (of the caller's tenant), refused unless their sessions are related by forks (`CHECKPOINT_NOT_IN_LINEAGE`, naming both). */
  async ofOneLineage(caller: Caller, firstId: string, secondId: string): Promise<[CheckpointRow, CheckpointRow]> {
    const first = await this.checkpoint(caller, firstId);
    const second = await this.checkpoint(caller, secondId);
    if (!(await this.family(caller, first.sessionId)).has(second.sessionId))
      throw new SpaceError(
        ErrorCode.CHECKPOINT_NOT_IN_LINEAGE,
        `checkpoints ${firstId} (session ${first.sessionId}) and ${secondId} (session ${second.sessionId}) are not of one lineage: their sessions are not related by forks`,
      );
    return [first, second];
  }

  /** Every session related to `sessionId` by forks: its root ancestor and all that root's descendants. */
  private async family(caller: Caller, sessionId: string): Promise<Set<string>> {
    let root = await this.sessions.row(caller, sessionId);
    for (let depth = 0; root.parentCheckpointId && depth < maxLineageDepth; depth++) {
      const parentCheckpoint = await this.store.getCheckpoint(caller.tenantId, root.parentCheckpointId);
      const parent = parentCheckpoint && (await this.store.getSession(caller.tenantId, parentCheckpoint.sessionId));
      if (!parent) break;
      root = parent;
    }
    const family = new Set<string>([root.id]);
    const queue = [root.id];
    while (queue.length && family.size < 10_000) {
      for (const child of await this.store.listChildren(queue.shift()!)) {
        if (!family.has(child.id)) {
          family.add(child.id);
          queue.push(child.id);
        }
      }
    }
    return family;
  }
}

export function toCheckpoint(row: CheckpointRow): Checkpoint {
  return {
    id: row.id,
    sessionId: row.sessionId,
    kind: row.kind,
    trigger: row.trigger,
    createdAt: row.createdAt,
    sizeBytes: row.sizeBytes,
    pauseMs: row.pauseMs,
    shippedAt: row.shippedAt,
    volumes: row.volumes.map(({ volumeId: _id, ...volume }) => volume),
  };
}
