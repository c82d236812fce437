import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type DataKey, ErrorCode, SpaceError, type StoredObject } from '@space/protocol';
import { signalAndWait } from '@space/server-kit';
import { Digest, type ObjectStore } from './object-store.js';
import { openObject, sealObject } from './object-sealing.js';
import type { Subvolumes } from './subvolumes.js';
import { finished, produce, readOn, toStdin } from './child-pipes.js';

/** How long a receive whose child failed reads its object on, to tell a short object from a refused one. */
const readOnMs = 60_000;

/** How long a stopping node gives a child after SIGTERM before SIGKILL. */
const childStopGraceMs = 10_000;

/** OBJECT_CORRUPT unless what was read of the object is what was stored. */
function checkReadBack(digest: Digest, object: StoredObject): void {
  const sha256 = digest.sha256();
  if (digest.bytes === object.bytes && sha256 === object.sha256) return;
  throw new SpaceError(
    ErrorCode.OBJECT_CORRUPT,
    `object ${object.key} read back as ${digest.bytes} bytes (sha256 ${sha256.slice(0, 12)}…), not the ${object.bytes} (${object.sha256.slice(0, 12)}…) stored`,
  );
}

/** A command and its arguments, run as a child of the node's own. */
export type Command = [command: string, ...args: string[]];

/**
 * The streams between the node's children (`btrfs send` and `receive`, `tar`) and the object store:
 * a child's output stored as an object sealed with a tenant's data key, and an object opened with
 * it into a child, every byte read checked against the size and sha256 recorded when it was stored.
 * It keeps the children under way, so a stopping node ends them (or they keep its storage busy and
 * it cannot be unmounted).
 */
export class SealedTransfer {
  private readonly children = new Set<ChildProcess>();
  private stopping = false;

  constructor(private readonly subvolumes: Subvolumes) {}

  /** `btrfs send` of a read-only subvolume (as a difference to `parent`) into the object store as `key`. */
  sendSubvolume(objects: ObjectStore, dataKey: DataKey, key: string, subvolume: string, parent: string | null): Promise<StoredObject> {
    return this.storeOutput(
      objects,
      dataKey,
      key,
      ['btrfs', 'send', '-q', ...(parent ? ['-p', parent] : []), subvolume],
      `btrfs send of ${path.basename(subvolume)}`,
    );
  }

  /** Stores what `command` writes as `key`, sealed; if either fails, the child is ended and nothing of the object kept. */
  async storeOutput(objects: ObjectStore, dataKey: DataKey, key: string, command: Command, what: string): Promise<StoredObject> {
    const child = this.spawnOwn(command, ['ignore', 'pipe', 'pipe']);
    const { output, done } = produce(child, what);
    const sealed = sealObject(dataKey, key);
    try {
      const [stored] = await Promise.all([objects.put(key, sealed), pipeline(output, sealed)]);
      await done;
      return { ...stored, dataKeyId: dataKey.id };
    } catch (err) {
      child.kill();
      await done.catch(() => undefined);
      await objects.delete(key).catch(() => undefined);
      throw err;
    }
  }

  /**
   * `btrfs receive` of a stored subvolume as `target` (the stream names it as it was sent: the same
   * name), checked; a failure or a mismatch in size or sha256 deletes it. It cannot be received
   * elsewhere and moved: a read-only subvolume cannot be renamed.
   */
  async receiveSubvolume(objects: ObjectStore, object: StoredObject, dataKey: DataKey, target: string): Promise<void> {
    await mkdir(path.dirname(target), { recursive: true });
    await this.subvolumes.delete(target);
    try {
      await this.receive(objects, object, dataKey, ['btrfs', 'receive', '-e', path.dirname(target)], `btrfs receive of ${path.basename(target)}`);
    } catch (err) {
      await this.subvolumes.delete(target).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Streams an object, opened with `dataKey`, into `command` (the object is fetched first: a missing
   * one starts nothing) and checks it read back as stored; on any failure the child is ended.
   */
  async receive(objects: ObjectStore, object: StoredObject, dataKey: DataKey, command: Command, what: string): Promise<void> {
    const opened = openObject(object, dataKey);
    const body: Readable = await objects.get(object.key);
    const child = this.spawnOwn(command, ['pipe', 'ignore', 'pipe']);
    const done = finished(child, what);
    const digest = new Digest();
    const read = pipeline(body, digest, opened, toStdin(child));
    try {
      await Promise.all([read, done]);
    } catch (err) {
      child.kill();
      await done.catch(() => undefined);
      // A child that refused its stream may have been fed a short or changed object (a store that
      // served less than it stored): the rest is read on, to the end, to say which of the two failed
      // (for a minute at most: a store that stalls then leaves the child's error standing).
      const outcome = await readOn(read, readOnMs);
      // Read to its end (opened or not): a size or sha256 that differs says the store changed it.
      if (outcome === 'ended' || digest.complete) checkReadBack(digest, object);
      body.destroy();
      if (outcome instanceof SpaceError) throw outcome;
      if (err instanceof SpaceError) throw err;
      const how =
        outcome === 'ended' ? 'read whole' : outcome === 'late' ? `still reading after ${readOnMs / 1000} s` : `the read broke off: ${outcome.message}`;
      throw new Error(`${(err as Error).message} (${digest.bytes} of the ${object.bytes} bytes of ${object.key} read; ${how})`);
    }
    checkReadBack(digest, object);
  }

  /**
   * Ends every child under way (their transfers fail, as interrupted ones do; what a receive left is
   * removed at the next start) and waits for them to exit (not for their pipes to drain: the output
   * of a send whose store stopped reading never is); nothing new starts after.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.children].map((child) => signalAndWait(child, 'SIGTERM', childStopGraceMs)));
  }

  /**
   * A child of the node's own, in a process group of its own: the terminal's Ctrl-C reaches the
   * node, which decides what to stop, and not the `btrfs send` or `tar` it is in the middle of.
   */
  private spawnOwn([command, ...args]: Command, stdio: ['ignore' | 'pipe', 'ignore' | 'pipe', 'pipe']): ChildProcess {
    if (this.stopping) throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, 'the node is stopping');
    const child = spawn(command, args, { stdio, detached: true });
    this.children.add(child);
    const forget = (): void => void this.children.delete(child);
    child.once('exit', forget);
    child.once('error', forget);
    return child;
  }
}
