import { ErrorCode, SpaceError, newId, type CreateVolumeRequest, type Volume, type VolumeMount, type VolumeSnapshot } from '@space/protocol';
import type { Caller } from '../tenants/auth.js';
import type { NodeClient } from '../cluster/node-client.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { CheckpointRow, SessionRow, SessionVolumeRow, Store, VolumeRow } from '../store/store.js';

/** Size of a fork's copy of a volume whose original is gone, GB. */
const fallbackSizeGb = 10;

/** What a restore with `restoreVolumes` puts back: each read-write volume of the session and the checkpoint's copy (of that volume or, across forks, of the one at the same path). */
export interface VolumeRestorePlan {
  checkpointId: string;
  volumes: { volumeId: string; sourceVolumeId: string }[];
}

/**
 * Tenants' volumes: named btrfs subvolumes on a node that outlive sessions, and their snapshots;
 * which sessions mount them (one writer at a time, claimed in the store), a fork's copies of them,
 * and putting them back from a checkpoint.
 */
export class VolumeService {
  constructor(
    private readonly store: Store,
    private readonly nodes: NodeDirectory,
  ) {}

  async create(caller: Caller, request: CreateVolumeRequest): Promise<Volume> {
    const snapshot = request.fromSnapshot ? await this.store.getVolumeSnapshot(caller.tenantId, request.fromSnapshot) : null;
    if (request.fromSnapshot && !snapshot) throw new SpaceError(ErrorCode.VOLUME_NOT_FOUND, `no volume snapshot ${JSON.stringify(request.fromSnapshot)}`);
    // A copy of a snapshot shares its blocks: it is made where the snapshot is.
    const node = await this.nodes.place(snapshot?.nodeId ?? null);
    const row: VolumeRow = {
      id: newId('vol'),
      tenantId: caller.tenantId,
      name: request.name,
      nodeId: node.nodeId,
      sizeGb: request.sizeGb,
      createdAt: new Date().toISOString(),
      fromSnapshot: snapshot?.id ?? null,
      ownerSessionId: null,
    };
    await this.insert(row);
    try {
      await node.createNamedVolume({ volumeId: row.id, sizeGb: row.sizeGb, ...(snapshot ? { from: { snapshotId: snapshot.id } } : {}) });
    } catch (err) {
      await this.store.deleteVolume(row.id);
      throw err;
    }
    return this.view(row);
  }

  async list(caller: Caller): Promise<Volume[]> {
    return Promise.all((await this.store.listVolumes(caller.tenantId)).map((row) => this.view(row)));
  }

  /** The volume with what it holds now (null when its node cannot tell). */
  async get(caller: Caller, name: string): Promise<Volume> {
    const row = await this.row(caller.tenantId, name);
    const usage = await (await this.nodes.client(row.nodeId)).namedVolumeUsage(row.id).catch(() => null);
    return { ...(await this.view(row)), usedBytes: usage?.bytes ?? null };
  }

  /** Deletes the volume and its snapshots; refused (VOLUME_IN_USE) while sessions mount it. */
  async delete(caller: Caller, name: string): Promise<void> {
    const row = await this.row(caller.tenantId, name);
    const mounts = await this.store.listVolumeMounts(row.id);
    if (mounts.length > 0)
      throw new SpaceError(ErrorCode.VOLUME_IN_USE, `volume ${name} is mounted by session(s) ${mounts.map((m) => m.sessionId).join(', ')}: delete them first`);
    await this.remove(row);
  }

  /** A read-only snapshot of the volume; the writes of a running sandbox mounting it read-write are flushed first. */
  async snapshot(caller: Caller, name: string): Promise<VolumeSnapshot> {
    const row = await this.row(caller.tenantId, name);
    const writer = (await this.store.listVolumeMounts(row.id)).find((m) => !m.readOnly);
    const id = newId('vsn');
    await (await this.nodes.client(row.nodeId)).snapshotNamedVolume(row.id, id, writer?.sessionId);
    const snapshot = { id, tenantId: caller.tenantId, volumeId: row.id, nodeId: row.nodeId, createdAt: new Date().toISOString() };
    await this.store.insertVolumeSnapshot(snapshot);
    return { id, volume: row.name, createdAt: snapshot.createdAt };
  }

  async listSnapshots(caller: Caller, name: string): Promise<VolumeSnapshot[]> {
    const row = await this.row(caller.tenantId, name);
    return (await this.store.listVolumeSnapshots(row.id)).map((s) => ({ id: s.id, volume: row.name, createdAt: s.createdAt }));
  }

  async deleteSnapshot(caller: Caller, name: string, snapshotId: string): Promise<void> {
    const row = await this.row(caller.tenantId, name);
    const snapshot = await this.store.getVolumeSnapshot(caller.tenantId, snapshotId);
    if (!snapshot || snapshot.volumeId !== row.id)
      throw new SpaceError(ErrorCode.VOLUME_NOT_FOUND, `volume ${name} has no snapshot ${JSON.stringify(snapshotId)}`);
    await (await this.nodes.client(snapshot.nodeId)).deleteVolumeSnapshot(snapshot.id);
    await this.store.deleteVolumeSnapshot(snapshot.id);
  }

  /**
   * The tenant's volumes a new session asks to mount, and the node they are on (null for none):
   * all on one node, and on `templateNode` when the session's template is on one.
   */
  async resolve(tenantId: string, mounts: VolumeMount[], templateNode: string | null): Promise<{ volumes: SessionVolumeRow[]; nodeId: string | null }> {
    const volumes: SessionVolumeRow[] = [];
    let nodeId = templateNode;
    for (const mount of mounts) {
      const row = await this.row(tenantId, mount.name);
      if (nodeId && row.nodeId !== nodeId)
        throw new SpaceError(
          ErrorCode.VOLUME_UNAVAILABLE,
          `volume ${mount.name} is on node ${row.nodeId}, but the session's ${templateNode ? 'template and ' : ''}other volumes are on ${nodeId}: a session's volumes must share a node`,
        );
      nodeId = row.nodeId;
      volumes.push({ volumeId: row.id, name: row.name, path: mount.path, readOnly: mount.readOnly ?? false });
    }
    return { volumes, nodeId };
  }

  /** Records the session's mounts; VOLUME_BUSY (nothing recorded) when another session mounts one of its read-write volumes read-write. */
  async claim(sessionId: string, volumes: SessionVolumeRow[]): Promise<void> {
    if (volumes.length === 0) return;
    const busy = await this.store.claimVolumeMounts(volumes.map((v) => ({ sessionId, volumeId: v.volumeId, path: v.path, readOnly: v.readOnly })));
    if (busy === null) return;
    const writer = (await this.store.listVolumeMounts(busy)).find((m) => !m.readOnly && m.sessionId !== sessionId);
    const name = volumes.find((v) => v.volumeId === busy)?.name ?? busy;
    throw new SpaceError(
      ErrorCode.VOLUME_BUSY,
      `volume ${name} is mounted read-write by session ${writer?.sessionId ?? '(another)'}: one session at a time may write it; mount it with readOnly: true`,
    );
  }

  /**
   * A fork's volumes, from the checkpoint it is made of: read-only ones are mounted as they are,
   * each read-write one becomes a copy of the checkpoint's copy of it, a volume of the fork's own
   * (`<name>-<8 characters of the fork's id>`, deleted with the fork).
   */
  async copyForFork(fork: SessionRow, checkpoint: CheckpointRow, node: NodeClient): Promise<SessionVolumeRow[]> {
    const volumes: SessionVolumeRow[] = [];
    for (const entry of checkpoint.volumes) {
      const original = await this.store.getVolume(fork.tenantId, entry.name);
      if (!entry.copied) {
        if (!original || original.id !== entry.volumeId)
          throw new SpaceError(ErrorCode.VOLUME_NOT_FOUND, `volume ${entry.name}, which the checkpoint mounted read-only, was deleted`);
        volumes.push({ volumeId: entry.volumeId, name: entry.name, path: entry.path, readOnly: true });
        continue;
      }
      const copy: VolumeRow = {
        id: newId('vol'),
        tenantId: fork.tenantId,
        name: `${entry.name.slice(0, 54)}-${fork.id.slice(4, 12)}`,
        nodeId: node.nodeId,
        sizeGb: original?.id === entry.volumeId ? original.sizeGb : fallbackSizeGb,
        createdAt: new Date().toISOString(),
        fromSnapshot: null,
        ownerSessionId: fork.id,
      };
      await this.insert(copy);
      await node.createNamedVolume({ volumeId: copy.id, sizeGb: copy.sizeGb, from: { checkpointId: checkpoint.id, volumeId: entry.volumeId } });
      volumes.push({ volumeId: copy.id, name: copy.name, path: entry.path, readOnly: false });
    }
    return volumes;
  }

  /** Deletes the volumes that belong to a session (a fork's copies), after the session's mounts are gone. */
  async deleteOwned(sessionId: string): Promise<void> {
    for (const row of await this.store.listOwnedVolumes(sessionId)) await this.remove(row);
  }

  /**
   * What `restoreVolumes` would put back, checked before anything changes: each read-write volume
   * of the session whose mount path the checkpoint has a copy at. The copies are on the
   * checkpoint's node and only there; a volume another session mounts is not changed under it.
   */
  async planRestore(session: SessionRow, checkpoint: CheckpointRow): Promise<VolumeRestorePlan> {
    const plan: VolumeRestorePlan = { checkpointId: checkpoint.id, volumes: [] };
    for (const volume of session.volumes.filter((v) => !v.readOnly)) {
      const copy = checkpoint.volumes.find((c) => c.copied && c.path === volume.path);
      if (!copy) continue;
      if (checkpoint.nodeId !== session.volumeNodeId)
        throw new SpaceError(
          ErrorCode.VOLUME_UNAVAILABLE,
          `checkpoint ${checkpoint.id}'s copies of volumes are on node ${checkpoint.nodeId}, not on the session's`,
        );
      const others = (await this.store.listVolumeMounts(volume.volumeId)).filter((m) => m.sessionId !== session.id);
      if (others.length > 0)
        throw new SpaceError(
          ErrorCode.VOLUME_BUSY,
          `volume ${volume.name} is also mounted by ${others.map((m) => m.sessionId).join(', ')}: it is not rolled back under them`,
        );
      plan.volumes.push({ volumeId: volume.volumeId, sourceVolumeId: copy.volumeId });
    }
    return plan;
  }

  /** Carries out a plan; the session's sandbox is stopped. */
  async restore(plan: VolumeRestorePlan, node: NodeClient): Promise<void> {
    for (const { volumeId, sourceVolumeId } of plan.volumes) await node.restoreNamedVolume(volumeId, plan.checkpointId, sourceVolumeId);
  }

  private async row(tenantId: string, name: string): Promise<VolumeRow> {
    const row = await this.store.getVolume(tenantId, name);
    if (!row) throw new SpaceError(ErrorCode.VOLUME_NOT_FOUND, `no volume ${JSON.stringify(name)}`);
    return row;
  }

  private async insert(row: VolumeRow): Promise<void> {
    if (!(await this.store.insertVolume(row))) throw new SpaceError(ErrorCode.VOLUME_EXISTS, `a volume named ${row.name} exists already`);
  }

  /** Deletes the volume's snapshots and the volume, on its node and in the store; on a lost node only in the store. */
  private async remove(row: VolumeRow): Promise<void> {
    if (!(await this.nodes.isLost(row.nodeId))) {
      const node = await this.nodes.client(row.nodeId);
      for (const snapshot of await this.store.listVolumeSnapshots(row.id)) await node.deleteVolumeSnapshot(snapshot.id);
      await node.deleteNamedVolume(row.id);
    }
    await this.store.deleteVolume(row.id);
  }

  private async view(row: VolumeRow): Promise<Volume> {
    return {
      name: row.name,
      sizeGb: row.sizeGb,
      createdAt: row.createdAt,
      nodeId: row.nodeId,
      fromSnapshot: row.fromSnapshot,
      ownerSessionId: row.ownerSessionId,
      mounts: (await this.store.listVolumeMounts(row.id)).map((m) => ({ sessionId: m.sessionId, path: m.path, readOnly: m.readOnly })),
    };
  }
}
