import { createHash } from 'node:crypto';
import type { Store } from '../store/store.js';

export interface RosterOptions {
  /** How often this control plane says it is alive and reads who else is. */
  beatMs: number;
  /** A control plane not heard for this long is gone: its share goes to the others. */
  goneAfterMs: number;
  now: () => number;
  log: (message: string) => void;
}

export const defaultRosterOptions = { beatMs: 1000, goneAfterMs: 3000 };

/** Rows of control planes not heard for this long are deleted (one that crashed leaves one), looked for this often. */
const forgetAfterMs = 3600_000;
const forgetEveryMs = 60_000;

/**
 * The control planes sharing the store, as each sees them: every one records itself every
 * `beatMs` and reads the others heard within `goneAfterMs`. Work that every replica would
 * otherwise repeat for every session (the maintenance of running sessions) is split by it: each
 * takes the sessions whose id hashes to its place among the live ones, so when one dies (or stops,
 * and leaves at once) the others take its share within `goneAfterMs` and a beat. Until its first
 * beat, and alone, a control plane's share is everything. Transient overlaps while the roster
 * changes are harmless: each session's work runs in its lifecycle turn.
 */
export class ControlPlaneRoster {
  private members: string[];
  private timer: NodeJS.Timeout | null = null;
  private forgotAt = 0;

  constructor(
    private readonly store: Pick<Store, 'heardControlPlane' | 'liveControlPlanes' | 'forgetControlPlane' | 'forgetControlPlanesBefore' | 'background'>,
    /** This control plane's id in the roster: its seat and a random instance, never reused. */
    readonly id: string,
    private readonly options: RosterOptions,
  ) {
    this.members = [id];
  }

  /** How many control planes share the work now (1 until the first beat). */
  get size(): number {
    return this.members.length;
  }

  /** Whether the session (or node: sweeps over the nodes split them too) of this id is in this control plane's share. */
  owns(id: string): boolean {
    if (this.members.length <= 1) return true;
    const place = createHash('sha256').update(id).digest().readUInt32BE(0) % this.members.length;
    return this.members[place] === this.id;
  }

  /** Records this control plane as alive and reads who else is. */
  async beat(): Promise<void> {
    const now = this.options.now();
    await this.store.heardControlPlane(this.id, now);
    const live = new Set(await this.store.liveControlPlanes(now - this.options.goneAfterMs));
    live.add(this.id);
    const members = [...live].sort();
    if (members.join() !== this.members.join()) this.options.log(`control planes sharing the maintenance: ${members.length} (${members.join(', ')})`);
    this.members = members;
    if (now - this.forgotAt < forgetEveryMs) return;
    this.forgotAt = now;
    await this.store.forgetControlPlanesBefore(now - forgetAfterMs);
  }

  start(): void {
    // On the background connections: a burst of calls must not make this control plane miss its beats.
    this.timer = setInterval(
      () => void this.store.background(() => this.beat()).catch((err: Error) => this.options.log(`control plane roster not updated: ${err.message}`)),
      this.options.beatMs,
    );
    this.timer.unref();
  }

  /** Stops beating and leaves the roster, so the others take this one's share at their next beat. */
  async leave(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.store.forgetControlPlane(this.id).catch(() => undefined);
  }
}
