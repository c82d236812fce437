// A session's lifecycle in one unit (create, start, resume, kill, delete, a lost node) because every step runs in the session's lifecycle turn and reads the same row: over ~300 lines for that.
import {
  ErrorCode,
  SandboxLayout,
  SpaceError,
  grantShown,
  newId,
  type CreateSessionRequest,
  type Resources,
  type SandboxMetrics,
  type Session,
} from '@space/protocol';
import type { Authenticator, Caller } from '../tenants/auth.js';
import type { Activity } from './activity.js';
import type { Metrics } from '../metrics/metrics.js';
import type { NodeClient } from '../cluster/node-client.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { CheckpointRow, SandboxHistoryRow, SessionLeaseRow, SessionRow, SessionSecret, Store } from '../store/store.js';
import type { CheckpointTaker } from '../checkpoints/checkpoint-taker.js';
import type { CheckpointShipper } from '../checkpoints/checkpoint-shipper.js';
import type { SessionMover } from './session-mover.js';
import type { EgressService } from '../tenants/egress-service.js';
import type { HeldLease, LifecycleOperation, LifecycleQueue } from './lifecycle-queue.js';
import type { TenantLimits } from '../tenants/tenant-limits.js';
import type { TemplateCatalog } from '../templates/template-catalog.js';
import type { VolumeService } from './volume-service.js';
import { applyTemplateConfig } from '../templates/template-config.js';
import { isPlacementStale, placeAnew, recordPlacedStart, updatePlaced } from './placements.js';
import { restoreLoopOf } from './restore-loops.js';
import { isSandboxDeath, type SandboxDeath } from './sandbox-deaths.js';

export interface SandboxTarget {
  sandboxId: string;
  node: NodeClient;
}

/** A sandbox just started: where it runs, the session's row as the start wrote it, and the start as its history records it. */
export interface StartedSandbox extends SandboxTarget {
  row: SessionRow;
  start: SandboxHistoryRow;
}

export interface SessionServiceDeps {
  store: Store;
  nodes: NodeDirectory;
  metrics: Metrics;
  taker: CheckpointTaker;
  activity: Activity;
  /** Keys this control plane looked up lately: a deleted session's tokens are forgotten with it. */
  keys: Pick<Authenticator, 'forgetSessionKeys'>;
  egress: EgressService;
  lifecycle: LifecycleQueue;
  limits: Pick<TenantLimits, 'checkSessions'>;
  templates: Pick<TemplateCatalog, 'forNewSession' | 'forStart'>;
  shipper: CheckpointShipper;
  mover: SessionMover;
  volumes: Pick<VolumeService, 'resolve' | 'claim' | 'copyForFork' | 'deleteOwned'>;
  /** Disk of a session that names none, GB. */
  defaultDiskGb: number;
}

/** SESSION_NOT_FOUND for `id`: also what another tenant's session answers. */
function noSession(id: string): SpaceError {
  return new SpaceError(ErrorCode.SESSION_NOT_FOUND, `no session ${JSON.stringify(id)}`);
}

/**
 * Sessions and the sandboxes that serve them. A session outlives its sandbox: when the sandbox is
 * gone, the next call starts a new one on the session's volume. Whatever changes a session's
 * sandbox or volume runs through the session's lifecycle queue, one operation at a time.
 */
export class SessionService {
  constructor(private readonly deps: SessionServiceDeps) {}

  /**
   * Creates a session and starts its sandbox. With `fork`, the session's volume is made from that
   * checkpoint first instead of from the template, while the checkpoint's session is held so that
   * it cannot be restored or deleted under the copy; it keeps its parent's working directory.
   */
  async create(
    caller: Caller,
    request: CreateSessionRequest,
    fork: { checkpoint: CheckpointRow; cwd: string | null; secrets: SessionSecret[] } | null = null,
  ): Promise<Session> {
    const fromCheckpoint = fork?.checkpoint ?? null;
    // A fork takes the secrets worked out from its parent's (one deleted since is simply not injected),
    // and its volume is the checkpoint's, whatever became of its template. It goes to any node when
    // the checkpoint is in the object store (fetched there first), else where the checkpoint is; a
    // session from a custom template goes where the template is, one with volumes where they are.
    // A fork of a checkpoint with volumes goes where the checkpoint's copies of them are.
    let onNode = fromCheckpoint && (!fromCheckpoint.shippedAt || fromCheckpoint.volumes.length > 0) ? fromCheckpoint.nodeId : null;
    let volumes: SessionRow['volumes'] = [];
    let { env, services } = request;
    let cwd = fork?.cwd ?? null;
    if (!fromCheckpoint) {
      await this.deps.egress.validateSession(caller.tenantId, request.secrets, request.env);
      const template = await this.deps.templates.forNewSession(caller.tenantId, request.template);
      ({ volumes, nodeId: onNode } = await this.deps.volumes.resolve(caller.tenantId, request.volumes, template.nodeId));
      // A template named by its id (a build's own session) starts bare: no CMD runs while it builds.
      if (!request.template.startsWith('tpl_')) ({ env, services, cwd } = applyTemplateConfig(template.config, env, services));
    }
    const node = await this.deps.nodes.place(onNode);
    const row: SessionRow = {
      id: newId('ses'),
      tenantId: caller.tenantId,
      template: request.template,
      status: 'starting',
      createdAt: new Date().toISOString(),
      env,
      resources: this.withDisk(request.resources),
      metadata: request.metadata,
      sandboxId: null,
      nodeId: null,
      sandboxStartedAt: null,
      parentCheckpointId: fromCheckpoint?.id ?? null,
      checkpointIntervalSec: request.checkpointIntervalSec,
      fullCheckpointIntervalSec: request.fullCheckpointIntervalSec,
      idleTimeoutSec: request.idleTimeoutSec,
      onResume: request.onResume,
      resumeNote: null,
      lastActiveAt: null,
      volumeNodeId: node.nodeId,
      secrets: fork?.secrets ?? request.secrets,
      egress: request.egress,
      expiresAt: expiryFrom(Date.now(), request.timeoutSec),
      onTimeout: request.onTimeout,
      services,
      volumes,
      publicPorts: request.publicPorts,
      cwd,
      codeCheckpointDelayMs: request.codeCheckpointDelayMs,
      // Its first placement: no other control plane can have placed a session not yet inserted.
      placementEpoch: 1,
    };
    const insert = (lease: SessionLeaseRow) => this.deps.store.insertSession(row, lease);
    const started = await this.deps.lifecycle.runNew(row.id, 'create', insert, async (lease) => {
      try {
        // Counted with the new row in: creations side by side cannot together pass the maximum.
        await this.deps.limits.checkSessions(row.tenantId);
        if (fromCheckpoint)
          await this.deps.lifecycle.run(fromCheckpoint.sessionId, 'fork', async () => {
            await this.deps.shipper.bringTo(node, fromCheckpoint);
            await node.restoreVolume(row.id, fromCheckpoint.id);
            row.volumes = await this.deps.volumes.copyForFork(row, fromCheckpoint, node);
            if (row.volumes.length > 0) await this.deps.store.updateSession(row.id, { volumes: row.volumes });
          });
        await this.deps.volumes.claim(row.id, row.volumes);
        return await this.startSandbox(row, { volumeReady: true, fresh: true, lease });
      } catch (err) {
        await node.deleteVolume(row.id).catch(() => undefined);
        await this.deps.store.deleteSession(row.id);
        await this.deps.volumes.deleteOwned(row.id).catch(() => undefined);
        throw err;
      }
    });
    // As written: a new session has this one start in its history and no checkpoint yet.
    return sessionView(started.row, [started.start], []);
  }

  /** Another tenant's session answers exactly like one that does not exist. */
  async row(caller: Caller, id: string): Promise<SessionRow> {
    const row = await this.deps.store.getSession(caller.tenantId, id);
    if (!row) throw noSession(id);
    return row;
  }

  /** `row` with the session's lease, read in one statement (a call's one read of its session). */
  async rowWithLease(caller: Caller, id: string): Promise<{ row: SessionRow; lease: SessionLeaseRow | null }> {
    const found = await this.deps.store.getSessionWithLease(caller.tenantId, id);
    if (!found) throw noSession(id);
    return found;
  }

  /**
   * Runs `work` as the session's lifecycle operation: the session must exist now (a fast 404), and
   * `work` gets it as it is when its turn comes (an operation before it may have changed or deleted it).
   */
  async inTurn<T>(caller: Caller, id: string, operation: LifecycleOperation, work: (row: SessionRow) => Promise<T>): Promise<T> {
    await this.row(caller, id);
    return this.deps.lifecycle.run(id, operation, async () => work(await this.row(caller, id)));
  }

  /** The session with its sandbox history and checkpoints. */
  async get(caller: Caller, id: string): Promise<Session> {
    const row = await this.row(caller, id);
    const checkpoints = await this.deps.store.listCheckpoints(id);
    return sessionView(row, await this.deps.store.listSandboxHistory(id), checkpoints);
  }

  async list(caller: Caller): Promise<Session[]> {
    // The newest checkpoint of each, from one query of the tenant's checkpoints (oldest first).
    const newest = new Map((await this.deps.store.listTenantCheckpoints(caller.tenantId)).map((c) => [c.sessionId, c.createdAt]));
    return (await this.deps.store.listSessions(caller.tenantId)).map((row) => toSession(row, newest.get(row.id) ?? null));
  }

  /** Deletes the session, its volume and its checkpoints; calls waiting behind it then find no session (404). */
  async delete(caller: Caller, id: string): Promise<void> {
    await this.inTurn(caller, id, 'delete', (row) => this.deleteLocked(row));
  }

  /** `delete` for a caller that holds the session's lifecycle queue (the maintenance, at a timeout). */
  async deleteLocked(row: SessionRow): Promise<void> {
    // On a lost node nothing can be deleted now; what the node keeps is swept when it is back.
    if (!(await this.onLostNode(row.volumeNodeId))) await (await this.deps.nodes.forVolume(row)).deleteVolume(row.id);
    // Its checkpoints go too (their objects in the object store with them): forks made from them have volumes of their own.
    for (const checkpoint of await this.deps.store.listCheckpoints(row.id)) {
      if (!(await this.onLostNode(checkpoint.nodeId))) await (await this.deps.nodes.client(checkpoint.nodeId)).deleteCheckpoint(checkpoint.id);
      await this.deps.store.deleteCheckpoint(checkpoint.id);
      await this.deps.shipper.dropObjects(checkpoint);
    }
    await this.deps.store.deleteSession(row.id);
    // A fork's copies of volumes go with it (its mounts went with the session's row).
    await this.deps.volumes.deleteOwned(row.id);
    this.deps.activity.forget(row.id);
    this.deps.keys.forgetSessionKeys(row.id);
  }

  /**
   * Returns the sandbox serving the session, starting one when there is none (a resume, queued like
   * any lifecycle operation). A resume starts on the session's volume as it is, unless the newest
   * checkpoint is a full one: then the sandbox is restored from it, so its processes continue.
   */
  async ensureSandbox(row: SessionRow): Promise<SandboxTarget> {
    if (row.sandboxId && row.status === 'running') return { sandboxId: row.sandboxId, node: await this.deps.nodes.forSandbox(row) };
    return this.deps.lifecycle.run(row.id, 'resume', async () => {
      // Read again in the queue: an operation before this one may have started a sandbox or deleted the session.
      const current = await this.deps.store.getSession(row.tenantId, row.id);
      if (!current) throw new SpaceError(ErrorCode.SESSION_NOT_FOUND, `session ${row.id} was deleted`);
      if (current.sandboxId && current.status === 'running') return { sandboxId: current.sandboxId, node: await this.deps.nodes.forSandbox(current) };
      try {
        // Its node lost: it goes on elsewhere from its newest shipped checkpoint (the move's note is the row's `resumeNote`).
        const moved = await this.deps.mover.moveIfLost(current);
        if (moved) return await this.startSandbox(moved.row, { volumeReady: true });
        return await this.startSandbox(current, { volumeReady: false });
      } catch (err) {
        // Another control plane placed it meanwhile (this one stalled past its lease): its sandbox serves.
        const now = isPlacementStale(err) ? await this.deps.store.getSession(row.tenantId, row.id) : null;
        if (now?.sandboxId && now.status === 'running') return { sandboxId: now.sandboxId, node: await this.deps.nodes.forSandbox(now) };
        throw err;
      }
    });
  }

  /**
   * Starts a sandbox for the session; only for a caller that holds the session's lifecycle queue.
   * `volumeReady` when that caller has just made the volume (a create, fork or restore), so it is
   * not a resume onto whatever the volume held; `fresh` when it has just inserted the row (a
   * create): no history, already `starting` at its first placement, nothing changed since; `lease`
   * when the start ends the caller's operation: released with the start's record.
   * Returns the row as it wrote it and the start as recorded in the history.
   */
  async startSandbox(
    given: SessionRow,
    { volumeReady, fresh = false, lease }: { volumeReady: boolean; fresh?: boolean; lease?: HeldLease },
  ): Promise<StartedSandbox> {
    // A placement of its own, from the one `given` has: another control plane that placed the
    // session since (this one stalled past its lease) makes this start stale before it begins. A
    // fresh row was inserted at its first placement.
    const row = fresh ? given : await placeAnew(this.deps.store, given);
    // A session that had a sandbox before is being resumed; its first start is not a resume.
    const history = fresh ? [] : await this.deps.store.listSandboxHistory(row.id);
    const resuming = history.length > 0;
    const started = performance.now();
    const node = await this.deps.nodes.forVolume(row);
    if (!fresh) await updatePlaced(this.deps.store, row, { status: 'starting' });
    try {
      const resumeNote = resuming && !volumeReady ? await this.prepareResume(row, node, history) : null;
      // Read again: the policy may have changed since `row` was loaded.
      const current = fresh ? row : ((await this.deps.store.getSession(row.tenantId, row.id)) ?? row);
      const info = await node.startSandbox({
        sessionId: row.id,
        tenantId: row.tenantId,
        template: await this.deps.templates.forStart(row.tenantId, row.template),
        env: { ...row.env, ...(await this.deps.egress.placeholders(current)) },
        resources: this.withDisk(row.resources),
        egress: await this.deps.egress.configFor(current),
        services: current.services,
        mounts: current.volumes.map((v) => ({ volumeId: v.volumeId, path: v.path, readOnly: v.readOnly })),
        ...(row.cwd ? { cwd: row.cwd } : {}),
      });
      this.deps.metrics.inc('sandbox_starts');
      if (resuming) {
        this.deps.metrics.inc('resumes');
        this.deps.metrics.observeResume((performance.now() - started) / 1000);
      }
      // A note a move or a crashed start left (its volume already went back or moved) is told now, once.
      const notes = new Set([current.resumeNote, resumeNote, info.note].filter((n): n is string => Boolean(n)));
      const running = { status: 'running', sandboxId: info.sandboxId, nodeId: info.nodeId, sandboxStartedAt: info.startedAt, resumeNote: null } as const;
      const start: SandboxHistoryRow = {
        id: info.sandboxId,
        sessionId: row.id,
        nodeId: info.nodeId,
        startedAt: info.startedAt,
        endedAt: null,
        endReason: null,
        restoredFrom: info.restoredFrom,
        note: [...notes].join('; ') || null,
      };
      try {
        await recordPlacedStart(this.deps.store, row, running, start, lease);
      } catch (err) {
        // Placed anew while it started: the sandbox is not the session's. Stopped unless the newer
        // placement is on the same node and found it serving (the node refuses this stop then).
        await node.stopSandbox(info.sandboxId).catch(() => undefined);
        throw err;
      }
      return { sandboxId: info.sandboxId, node, row: { ...current, ...running }, start };
    } catch (err) {
      // Only while it is still this placement: a stale start leaves the newer one's row as it is.
      await this.deps.store.updatePlacedSession(row.id, row.placementEpoch, { status: 'failed', sandboxId: null, nodeId: null, sandboxStartedAt: null });
      throw err;
    }
  }

  /**
   * What a resume brings back when the newest checkpoint (not counting those resumes kept) is a
   * full one, as the session's `onResume` says; returns what the session's history should tell. Files unchanged since the checkpoint: it is
   * restored (nothing is lost). Otherwise `processes`: the volume goes back to the checkpoint so
   * memory and files match, what it held since kept first as an fs checkpoint; `files`: the sandbox
   * boots on the newest files and the checkpoint's processes are not restored. So too when sandboxes
   * restored from that checkpoint died of it (`restoreLoopOf`): its memory would take the next one down.
   */
  private async prepareResume(row: SessionRow, node: NodeClient, history: readonly SandboxHistoryRow[]): Promise<string | null> {
    // The fs checkpoints a resume keeps of the files it went back from are copies, not a newer
    // state: past them, the next resume goes back to the same full checkpoint again.
    const newest = (await this.deps.store.listCheckpoints(row.id)).filter((c) => c.trigger !== 'resume').at(-1);
    if (newest?.kind !== 'full') return null;
    const loop = restoreLoopOf(history, newest.id);
    if (loop) return `booted on the newest files; the processes of ${newest.id} were not restored: ${loop}`;
    if (!(await node.volumeChanged(row.id, newest.id))) {
      await node.restoreVolume(row.id, newest.id);
      return null;
    }
    if (row.onResume === 'files') return `booted on the newest files (onResume: files); the processes of ${newest.id} were not restored`;
    // Never pruned: it may be the only copy of acknowledged writes.
    const kept = await this.deps.taker.take(row, 'fs', 'resume');
    // A resume a crash cut short after it went back already: its note, not yet in the history, names
    // where those files are, and stays in front of this one.
    const note = [
      row.resumeNote,
      `went back to ${newest.id} of ${newest.createdAt} to restore its processes; the files written after it are kept in ${kept.id}`,
    ]
      .filter(Boolean)
      .join('; ');
    // Stored before the volume changes: the history gets it even if this process dies before the sandbox starts.
    await this.deps.store.updateSession(row.id, { resumeNote: note });
    await node.restoreVolume(row.id, newest.id);
    return note;
  }

  /** Whether `nodeId` is a lost node (null: the configured node, never treated as lost here). */
  async onLostNode(nodeId: string | null): Promise<boolean> {
    return nodeId !== null && (await this.deps.nodes.isLost(nodeId));
  }

  /** Disk of a session that names none, GB. */
  get defaultDiskGb(): number {
    return this.deps.defaultDiskGb;
  }

  /** The resources with the platform's default disk when they name none (sessions from before disks had a size too). */
  private withDisk(resources: Resources): Resources {
    return { ...resources, diskGb: resources.diskGb ?? this.deps.defaultDiskGb };
  }

  /** Marks the session as having no sandbox (`status`), so the next call starts one. */
  async forgetSandbox(
    row: SessionRow,
    sandboxId: string,
    reason: SandboxDeath | 'killed' | 'restored' | 'idle' | 'paused' | 'lost',
    status: 'stopped' | 'idle' = 'stopped',
  ): Promise<void> {
    // Lost: the node no longer runs it (found by reconciliation), so it died all the same; unresponsive: its node stopped it.
    if (isSandboxDeath(reason) || reason === 'lost') this.deps.metrics.inc('sandbox_deaths');
    await this.deps.store.recordSandboxEnd(sandboxId, reason);
    const current = await this.deps.store.getSession(row.tenantId, row.id);
    // At the placement read: a sandbox another control plane started since is not forgotten.
    if (current?.sandboxId === sandboxId)
      await this.deps.store.updatePlacedSession(row.id, current.placementEpoch, { status, sandboxId: null, nodeId: null, sandboxStartedAt: null });
  }

  /** What the session's sandbox uses now; a session without one is not resumed for it (SESSION_NOT_RUNNING). */
  async metrics(caller: Caller, id: string): Promise<SandboxMetrics> {
    const row = await this.row(caller, id);
    if (!row.sandboxId || row.status !== 'running') throw new SpaceError(ErrorCode.SESSION_NOT_RUNNING, `session ${id} has no sandbox running`);
    return (await this.deps.nodes.forSandbox(row)).sandboxMetrics(row.sandboxId);
  }

  /** Stops the session's sandbox only; the session and its files stay. */
  async killSandbox(caller: Caller, id: string): Promise<void> {
    await this.inTurn(caller, id, 'kill', async (row) => {
      if (!row.sandboxId) return;
      await (await this.deps.nodes.forSandbox(row)).stopSandbox(row.sandboxId);
      await this.forgetSandbox(row, row.sandboxId, 'killed');
    });
  }

  /** The maintenance stopped an idle session's sandbox, or a pause did: the session shows `idle` until its next call. */
  async markIdle(row: SessionRow, sandboxId: string, reason: 'idle' | 'paused' = 'idle'): Promise<void> {
    await this.forgetSandbox(row, sandboxId, reason, 'idle');
  }

  /**
   * After node `nodeId` stopped every sandbox (shutdown), its sessions show no sandbox until used.
   * Each at the placement read: one placed anew meanwhile (by another control plane) is left as that one made it.
   */
  async nodeStopped(nodeId: string): Promise<void> {
    for (const row of await this.deps.store.listSessionsOnNode(nodeId)) {
      if ((row.nodeId ?? row.volumeNodeId) !== nodeId || (!row.sandboxId && row.status === 'stopped')) continue;
      try {
        await updatePlaced(this.deps.store, row, { status: 'stopped', sandboxId: null, nodeId: null, sandboxStartedAt: null });
      } catch (err) {
        if (isPlacementStale(err)) continue;
        throw err;
      }
      if (row.sandboxId) await this.deps.store.recordSandboxEnd(row.sandboxId, 'node stopped');
    }
  }
}

/** When a timeout of `timeoutSec` from `now` passes; null for none. */
export function expiryFrom(now: number, timeoutSec: number | undefined): string | null {
  return timeoutSec ? new Date(now + timeoutSec * 1000).toISOString() : null;
}

/** A session as the API shows it: its row, its sandbox history and its checkpoints (oldest first). */
function sessionView(row: SessionRow, history: SandboxHistoryRow[], checkpoints: CheckpointRow[]): Session {
  return {
    ...toSession(row, checkpoints.at(-1)?.createdAt ?? null),
    sandboxHistory: history.map(({ sessionId: _session, ...entry }) => entry),
    checkpoints: checkpoints.map((c) => ({ id: c.id, kind: c.kind, createdAt: c.createdAt })),
  };
}

function toSession(row: SessionRow, lastCheckpointAt: string | null): Session {
  return {
    id: row.id,
    tenantId: row.tenantId,
    template: row.template,
    status: row.status,
    createdAt: row.createdAt,
    env: row.env,
    resources: row.resources,
    metadata: row.metadata,
    checkpointIntervalSec: row.checkpointIntervalSec,
    fullCheckpointIntervalSec: row.fullCheckpointIntervalSec,
    idleTimeoutSec: row.idleTimeoutSec,
    onResume: row.onResume,
    codeCheckpointDelayMs: row.codeCheckpointDelayMs,
    expiresAt: row.expiresAt,
    onTimeout: row.onTimeout,
    services: row.services,
    volumes: row.volumes.map(({ name, path, readOnly }) => ({ name, path, readOnly })),
    publicPorts: row.publicPorts,
    cwd: row.cwd ?? SandboxLayout.workdir,
    secrets: row.secrets.map(grantShown),
    egress: row.egress,
    sandbox: row.sandboxId && row.nodeId && row.sandboxStartedAt ? { id: row.sandboxId, nodeId: row.nodeId, startedAt: row.sandboxStartedAt } : null,
    nodeId: row.volumeNodeId,
    parentCheckpointId: row.parentCheckpointId,
    lastCheckpointAt,
  };
}
