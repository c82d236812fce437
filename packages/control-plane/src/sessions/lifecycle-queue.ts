import { randomBytes } from 'node:crypto';
import { inSpan } from '@space/server-kit';
import { ErrorCode, SpaceError } from '@space/protocol';
import { KeyedQueue } from '@space/server-kit';
import type { SessionLeaseRow, Store } from '../store/store.js';

/** What changes a session's sandbox or volume; at most one runs per session at a time. */
export type LifecycleOperation =
  | 'create'
  | 'delete'
  | 'restore'
  | 'checkpoint'
  | 'kill'
  | 'fork'
  | 'resume'
  | 'maintenance'
  | 'move'
  | 'pause'
  | 'services'
  | 'ports';

export interface LifecycleQueueOptions {
  /** How long a call waits for the operations queued before it; then it gets SESSION_BUSY (`SPACE_LIFECYCLE_WAIT_MS`). */
  waitMs: number;
  /** How long a lease lasts unless renewed: how soon a dead replica's operation is given up. */
  leaseMs: number;
  /** How often a waiter looks again at a lease held by another process. */
  pollMs: number;
  now: () => number;
  /**
   * Where this queue's process sits, written at the head of its leases' holders: no two live
   * processes share it, so a process in the seat of one that died may release what that one held
   * (`releasePredecessors`). Empty: the process is known only by a random instance id.
   */
  seat: string;
}

/**
 * The lease of a new session's first operation, given to its work: an operation whose last write
 * releases the lease with it (a create's start) says so with `released`, and the lease is not
 * released again (one statement fewer per create).
 */
export interface HeldLease {
  readonly holder: string;
  released: boolean;
}

const defaultLifecycleOptions: LifecycleQueueOptions = { waitMs: 30_000, leaseMs: 15_000, pollMs: 50, now: Date.now, seat: '' };

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One queue of lifecycle operations per session (restore, delete, checkpoint, kill, fork-from,
 * resume). Within this process they wait their turn in arrival order; across control-plane
 * processes a lease in the store makes them exclusive, renewed while the operation runs and
 * expiring if its holder dies. Not re-entrant: code running as a session's operation calls the
 * `…Locked` variants of what it needs (a restore starts the sandbox with `startSandbox`, maintenance
 * takes checkpoints with `createLocked`), never `run` or `settled` for the same session. (An
 * AsyncLocalStorage could make it re-entrant, but on Node 20 using one once slows every promise in
 * the process about 2.7x, measured.)
 */
export class LifecycleQueue {
  private readonly local = new KeyedQueue();
  /** The operation each session of this process is running, for the SESSION_BUSY message. */
  private readonly running = new Map<string, LifecycleOperation>();
  private readonly instance = randomBytes(6).toString('hex');
  private holdings = 0;
  private readonly options: LifecycleQueueOptions;

  constructor(
    private readonly store: Store,
    private readonly log: (message: string) => void,
    options: Partial<LifecycleQueueOptions> = {},
  ) {
    this.options = { ...defaultLifecycleOptions, ...options };
  }

  /** Runs `work` as the session's only lifecycle operation, after those queued before it (waiting at most `waitMs`). */
  run<T>(sessionId: string, operation: LifecycleOperation, work: () => Promise<T>, options: { waitMs?: number } = {}): Promise<T> {
    const waitMs = options.waitMs ?? this.options.waitMs;
    const deadline = this.options.now() + waitMs;
    return this.local.run(sessionId, () => this.holding(sessionId, operation, (lease) => this.acquire(lease, deadline, waitMs), work), {
      ms: waitMs,
      timedOut: () => this.busy(sessionId, waitMs),
    });
  }

  /**
   * Runs `work` as the first operation of a session no one knows yet: `insert` writes the session
   * with its lease, together (one statement on PostgreSQL), so no other process sees it unleased
   * and the lease costs no write of its own. Nothing can be queued before it.
   */
  runNew<T>(
    sessionId: string,
    operation: LifecycleOperation,
    insert: (lease: SessionLeaseRow) => Promise<void>,
    work: (lease: HeldLease) => Promise<T>,
  ): Promise<T> {
    return this.local.run(sessionId, () => this.holding(sessionId, operation, insert, work));
  }

  /** Takes the session's lease with `take`, runs `work` with it renewed, releases it whatever happens. */
  private async holding<T>(
    sessionId: string,
    operation: LifecycleOperation,
    take: (lease: SessionLeaseRow) => Promise<void>,
    work: (lease: HeldLease) => Promise<T>,
  ): Promise<T> {
    const holder = `${this.options.seat}/${this.instance}-${++this.holdings}`;
    const lease = { sessionId, holder, operation, expiresAt: this.options.now() + this.options.leaseMs };
    const held: HeldLease = { holder, released: false };
    await inSpan('lifecycle lease', { 'space.operation': operation }, () => take(lease));
    this.running.set(sessionId, operation);
    const renew = setInterval(() => {
      this.store.renewSessionLease(sessionId, holder, this.options.now() + this.options.leaseMs).then(
        (renewed) => {
          if (!renewed && !held.released) this.log(`the ${operation} of ${sessionId} outlived its lease; another control plane may have taken the session`);
        },
        (err: unknown) => this.log(`the lease of ${sessionId}'s ${operation} was not renewed: ${(err as Error).message}`),
      );
    }, this.options.leaseMs / 3);
    renew.unref();
    try {
      return await work(held);
    } finally {
      clearInterval(renew);
      this.running.delete(sessionId);
      // A lease that cannot be released (the database is away) expires by itself.
      if (!held.released)
        await this.store
          .releaseSessionLease(sessionId, holder)
          .catch((err: unknown) => this.log(`the lease of ${sessionId}'s ${operation} was not released: ${(err as Error).message}`));
    }
  }

  /**
   * Resolves when no lifecycle operation of the session is queued or running, here or in another
   * process: a call that only uses the sandbox (exec, files) then sees the session as that
   * operation left it. Waits at most `waitMs`, then SESSION_BUSY.
   */
  async settled(sessionId: string, waitMs = this.options.waitMs): Promise<void> {
    const deadline = this.options.now() + waitMs;
    await this.local.drained(sessionId, { ms: waitMs, timedOut: () => this.busy(sessionId, waitMs) });
    for (;;) {
      const lease = await this.store.getSessionLease(sessionId);
      if (!lease || lease.expiresAt <= this.options.now()) return;
      if (this.options.now() >= deadline) throw this.busy(sessionId, waitMs, lease.operation);
      await pause(this.options.pollMs);
    }
  }

  /** Whether no operation of the session runs or waits here, nor holds `lease` (as read with the session's row) elsewhere: `settled` would return at once. */
  isSettled(sessionId: string, lease: SessionLeaseRow | null): boolean {
    return !this.local.busy(sessionId) && (!lease || lease.expiresAt <= this.options.now());
  }

  /**
   * Releases the leases a process that sat in this seat before left when it died (instead of making
   * its sessions wait until they expire), or, with `everyone`, all leases: for a store no other
   * process uses. Call it at start, before this queue runs anything. Returns how many.
   */
  releasePredecessors(everyone: boolean): Promise<number> {
    if (!everyone && !this.options.seat) return Promise.resolve(0);
    return this.store.releaseSessionLeasesOf(everyone ? '' : `${this.options.seat}/`);
  }

  /** Whether this process is running or queueing an operation of the session. */
  busyHere(sessionId: string): boolean {
    return this.local.busy(sessionId);
  }

  /** Takes `lease` once no one else holds the session's (its expiry renewed at each try); SESSION_BUSY past `deadline`. */
  private async acquire(lease: SessionLeaseRow, deadline: number, waitMs: number): Promise<void> {
    for (;;) {
      const now = this.options.now();
      if (await this.store.acquireSessionLease({ ...lease, expiresAt: now + this.options.leaseMs }, now)) return;
      if (now >= deadline) throw this.busy(lease.sessionId, waitMs, (await this.store.getSessionLease(lease.sessionId))?.operation);
      await pause(this.options.pollMs);
    }
  }

  /** SESSION_BUSY, naming the operation in the way (`held`: one another process holds, read from its lease). */
  private busy(sessionId: string, waitedMs: number, held?: string): SpaceError {
    const operation = this.running.get(sessionId) ?? held ?? 'another operation';
    return new SpaceError(
      ErrorCode.SESSION_BUSY,
      `session ${sessionId} is busy with a ${operation} and stayed busy for ${(waitedMs / 1000).toFixed(1)} s; try again`,
      { operation },
    );
  }
}
