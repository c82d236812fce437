import { ErrorCode, SpaceError, maxBasesPerDelete, newId, type ShipBase, type StoredObject } from '@space/protocol';
import type { NodeClient } from '../cluster/node-client.js';
import { KeyedQueue, chunksOf, eachAtMost, inSpan } from '@space/server-kit';
import type { Metrics } from '../metrics/metrics.js';
import { type NodeDirectory, nodesAskedAtOnce } from '../cluster/node-directory.js';
import type { CheckpointRow, ShipBaseRow, Store } from '../store/store.js';
import type { DataKeys } from './data-keys.js';

export interface CheckpointShipperDeps {
  store: Store;
  nodes: NodeDirectory;
  /** The tenants' keys, which every object is sealed with. */
  dataKeys: DataKeys;
  metrics: Metrics;
  log: (message: string) => void;
  /** Whether the nodes have an object store (`SPACE_OBJECT_STORE`); without one nothing is shipped. */
  enabled: boolean;
  /** Names this control plane's claims on shipments in the store (its seat and a random instance id). */
  holder: string;
  /** How long a claim lasts unless renewed (a third of it apart) while the shipment runs. */
  claimMs?: number;
  now?: () => number;
}

const defaultClaimMs = 15_000;
/** How often a shipment another control plane holds is looked at by one that needs it shipped. */
const claimPollMs = 250;

/** A base is replaced once a difference to it grows past this share of it, or once it is this old. */
const rebaseShare = 0.5;
const rebaseAfterMs = 24 * 3600_000;

/**
 * Ships every checkpoint to the object store after it is taken, in the background (a checkpoint
 * call never waits for it), one at a time per session: as a `btrfs send` difference to the
 * session's base, a full copy of one of its checkpoints made when it has none or the differences
 * grew large. What fails is tried again by maintenance; until then the checkpoint is usable on its
 * node and shows `shippedAt: null`. Deleting a checkpoint deletes its objects; a base goes once no
 * checkpoint needs it. Every object is sealed with its tenant's data key (`DataKeys`).
 *
 * A shipment is claimed in the store for as long as it runs (renewed, `claimMs`): of the control
 * planes, one ships each checkpoint, and when its control plane dies another takes it over at its
 * next maintenance pass once the claim expired (`takeOverAbandoned`), not at the minute's retry.
 */
export class CheckpointShipper {
  private readonly perSession = new KeyedQueue();
  private readonly now: () => number;

  private readonly claimMs: number;

  constructor(private readonly deps: CheckpointShipperDeps) {
    this.now = deps.now ?? Date.now;
    this.claimMs = deps.claimMs ?? defaultClaimMs;
  }

  get enabled(): boolean {
    return this.deps.enabled;
  }

  /** Ships the checkpoint soon; a failure is logged and counted, and retried by `retryUnshipped`. */
  shipSoon(row: CheckpointRow): void {
    if (!this.deps.enabled) return;
    void this.ship(row).catch((err: Error) => {
      this.deps.metrics.inc('checkpoint_ship_failures');
      this.deps.log(`checkpoint ${row.id} of ${row.sessionId} not shipped yet: ${err.message}`);
    });
  }

  /**
   * Ships it now (after what is under way for its session); nothing for one shipped or deleted
   * meanwhile. One another control plane is shipping is left to it, or with `awaitOthers` waited
   * for (taken over if its claim expires first). True when this call shipped it.
   */
  ship(row: CheckpointRow, { awaitOthers = false } = {}): Promise<boolean> {
    return this.perSession.run(row.sessionId, async () => {
      for (;;) {
        const current = await this.deps.store.getCheckpoint(row.tenantId, row.id);
        if (!current || current.shippedAt) return false;
        if (await this.deps.store.claimShipment(row.id, this.deps.holder, this.now() + this.claimMs, this.now()))
          return inSpan('ship checkpoint', { 'space.checkpoint_id': row.id }, () => this.shipClaimed(current));
        if (!awaitOthers) return false;
        await new Promise((resolve) => setTimeout(resolve, claimPollMs));
      }
    });
  }

  /**
   * Starts shipping, in the background, what shipments left unfinished when their control plane
   * died (or stalled past its claim); returns how many it started.
   */
  async takeOverAbandoned(): Promise<number> {
    if (!this.deps.enabled) return 0;
    const abandoned = await this.deps.store.listAbandonedShipments(this.now());
    for (const row of abandoned) this.shipSoon(row);
    return abandoned.length;
  }

  /** Ships the claimed checkpoint, renewing the claim meanwhile; released at the end, shipped or not. */
  private async shipClaimed(current: CheckpointRow): Promise<boolean> {
    const renew = setInterval(() => {
      this.deps.store
        .claimShipment(current.id, this.deps.holder, this.now() + this.claimMs, this.now())
        .catch((err: Error) => this.deps.log(`the claim on shipping ${current.id} was not renewed: ${err.message}`));
    }, this.claimMs / 3);
    renew.unref();
    try {
      const started = this.now();
      const node = await this.deps.nodes.client(current.nodeId);
      const dataKey = await this.deps.dataKeys.forTenant(current.tenantId);
      const base = await this.baseFor(current);
      const objects = await node.shipCheckpoint(current.id, shipBaseOf(base), dataKey);
      if (!(await this.deps.store.markShipped(current.id, this.deps.holder, { at: new Date(this.now()).toISOString(), baseId: base.id, objects }))) {
        // Deleted while it was being stored: its objects go too. Not when the claim was lost (this
        // process stalled past it): the control plane that took it over stores the same keys.
        if (!(await this.deps.store.getCheckpoint(current.tenantId, current.id))) await node.deleteObjects(objects.map((o) => o.key)).catch(() => undefined);
        else this.deps.log(`checkpoint ${current.id}: its shipment outlived its claim; another control plane ships it`);
        return false;
      }
      const bytes = objects.reduce((sum, o) => sum + o.bytes, 0);
      this.deps.metrics.inc('checkpoints_shipped');
      this.deps.metrics.inc('checkpoint_shipped_bytes', {}, bytes);
      this.deps.metrics.inc('checkpoint_ship_seconds', {}, (this.now() - started) / 1000);
      return true;
    } finally {
      clearInterval(renew);
      await this.deps.store.releaseShipment(current.id, this.deps.holder).catch(() => undefined);
    }
  }

  /** Ships what is not shipped yet and older than `minAgeMs` (left by failures and restarts); returns how many shipped. */
  async retryUnshipped(minAgeMs: number): Promise<number> {
    if (!this.deps.enabled) return 0;
    let shipped = 0;
    for (const row of await this.deps.store.listUnshipped()) {
      if (this.now() - Date.parse(row.createdAt) < minAgeMs) continue;
      try {
        if (await this.ship(row)) shipped++;
      } catch (err) {
        this.deps.metrics.inc('checkpoint_ship_failures');
        this.deps.log(`checkpoint ${row.id} of ${row.sessionId} not shipped yet: ${(err as Error).message}`);
      }
    }
    return shipped;
  }

  /** The stored form of a shipped checkpoint, for a node to fetch it; null when it is not shipped. */
  async shippedForm(row: CheckpointRow): Promise<{ base: ShipBase; objects: StoredObject[] } | null> {
    if (!row.shippedAt || !row.shippedBaseId || !row.shippedObjects) return null;
    const base = await this.deps.store.getShipBase(row.shippedBaseId);
    return base ? { base: shipBaseOf(base), objects: row.shippedObjects } : null;
  }

  /**
   * Makes sure `node` holds the checkpoint: fetched from the object store when it is on another
   * node (a fork or restore placed elsewhere, a lost node); NODE_UNAVAILABLE when it was never shipped.
   */
  async bringTo(node: NodeClient, checkpoint: CheckpointRow): Promise<void> {
    if (checkpoint.nodeId === node.nodeId) return;
    const form = await this.shippedForm(checkpoint);
    if (!form)
      throw new SpaceError(
        ErrorCode.NODE_UNAVAILABLE,
        `checkpoint ${checkpoint.id} is on node ${checkpoint.nodeId} only (${this.deps.enabled ? 'not in the object store yet' : 'no object store: SPACE_OBJECT_STORE'}); node ${node.nodeId} cannot use it`,
      );
    await node.fetchCheckpoint(checkpoint.id, form.base, form.objects, await this.deps.dataKeys.forTenant(checkpoint.tenantId));
  }

  /** Deletes a deleted checkpoint's objects (through any node that answers); what fails stays as garbage and is logged. */
  async dropObjects(row: CheckpointRow): Promise<void> {
    if (!row.shippedObjects?.length) return;
    await this.deleteObjects(row.shippedObjects.map((o) => o.key)).catch((err: Error) =>
      this.deps.log(`objects of deleted checkpoint ${row.id} not deleted: ${err.message}`),
    );
  }

  /**
   * Deletes bases no checkpoint needs any more (those `owns` takes): their objects, and their copies
   * on the nodes. Any node may hold a copy (fetched for a fork or a move): each live node is asked
   * once for up to `maxBasesPerDelete` of them, several nodes at once. A base's row goes last, so
   * what fails is tried again at the next sweep.
   */
  async collectBases(owns: (baseId: string) => boolean = () => true): Promise<number> {
    if (!this.deps.enabled) return 0;
    const bases = (await this.deps.store.unusedShipBases()).filter((b) => owns(b.id));
    for (const chunk of chunksOf(bases, maxBasesPerDelete)) await this.collect(chunk);
    return bases.length;
  }

  private async collect(bases: ShipBaseRow[]): Promise<void> {
    for (const base of bases) await this.deleteObjects([base.object, ...base.volumeObjects].map((o) => o.key));
    const ids = bases.map((b) => b.id);
    await eachAtMost(await this.deps.nodes.live(), nodesAskedAtOnce, async (node) => {
      await node.deleteBases(ids).catch(() => undefined);
    });
    for (const id of ids) await this.deps.store.deleteShipBase(id);
  }

  /**
   * The session's base, or a new one made of this checkpoint when there is none, it has grown
   * stale, or it lacks a copy of a volume the checkpoint has one of (made before volumes shipped).
   */
  private async baseFor(row: CheckpointRow): Promise<ShipBaseRow> {
    const base = await this.deps.store.newestShipBase(row.sessionId);
    const covers = (b: ShipBaseRow) => row.volumes.every((v) => !v.copied || b.volumeObjects.some((o) => o.volumeId === v.volumeId));
    if (base && covers(base) && !(await this.stale(base))) return base;
    const node = await this.deps.nodes.client(row.nodeId);
    const id = newId('bse');
    const created = await node.createBase(id, row.id, await this.deps.dataKeys.forTenant(row.tenantId));
    const made: ShipBaseRow = {
      id,
      sessionId: row.sessionId,
      object: created.object,
      volumeObjects: created.volumes ?? [],
      createdAt: new Date(this.now()).toISOString(),
    };
    await this.deps.store.insertShipBase(made);
    return made;
  }

  private async stale(base: ShipBaseRow): Promise<boolean> {
    if (this.now() - Date.parse(base.createdAt) > rebaseAfterMs) return true;
    const newest = (await this.deps.store.listCheckpoints(base.sessionId)).filter((c) => c.shippedBaseId === base.id).at(-1);
    const difference = newest?.shippedObjects?.find((o) => o.key.endsWith('.send') && !o.volumeId)?.bytes ?? 0;
    return difference > base.object.bytes * rebaseShare;
  }

  private async deleteObjects(keys: string[]): Promise<void> {
    const node = (await this.deps.nodes.live())[0];
    if (!node) throw new Error('no node answers to delete objects through');
    await node.deleteObjects(keys);
  }
}

/** A base as a node is sent it. */
function shipBaseOf(row: ShipBaseRow): ShipBase {
  return { id: row.id, object: row.object, volumes: row.volumeObjects };
}
