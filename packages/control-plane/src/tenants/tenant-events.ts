import type { TenantEvent } from '@space/protocol';
import type { Store } from '../store/store.js';

type Listener = (event: TenantEvent) => void;

interface Snapshot {
  sessions: Map<string, { status: string; sandboxId: string | null }>;
  checkpoints: Map<string, string>;
}

/**
 * Tenants' events, for `GET /v1/events`. They are read from the store, not from this process's own
 * operations, so a subscriber sees what every control plane did: while a tenant has subscribers
 * here, one watcher per tenant compares its sessions and checkpoints with the last look, every
 * `intervalMs`, and tells each subscriber what changed (one pair of queries per tenant and
 * interval, however many subscribers).
 */
export class TenantEvents {
  private readonly watchers = new Map<string, { listeners: Set<Listener>; timer: NodeJS.Timeout; last: Snapshot | null; busy: boolean }>();

  constructor(
    private readonly store: Store,
    private readonly intervalMs = 1000,
  ) {}

  /** Calls `listener` with the tenant's events from now on; returns the unsubscribe. */
  subscribe(tenantId: string, listener: Listener): () => void {
    let watcher = this.watchers.get(tenantId);
    if (!watcher) {
      const created = { listeners: new Set<Listener>(), timer: setInterval(() => void this.look(tenantId), this.intervalMs), last: null, busy: false };
      created.timer.unref();
      this.watchers.set(tenantId, created);
      watcher = created;
      void this.look(tenantId);
    }
    watcher.listeners.add(listener);
    return () => {
      watcher.listeners.delete(listener);
      if (watcher.listeners.size === 0) {
        clearInterval(watcher.timer);
        this.watchers.delete(tenantId);
      }
    };
  }

  /** Stops every watcher (the control plane stops). */
  stop(): void {
    for (const watcher of this.watchers.values()) clearInterval(watcher.timer);
    this.watchers.clear();
  }

  private async look(tenantId: string): Promise<void> {
    const watcher = this.watchers.get(tenantId);
    if (!watcher || watcher.busy) return;
    watcher.busy = true;
    try {
      const [sessions, checkpoints] = await Promise.all([this.store.listSessions(tenantId), this.store.listTenantCheckpoints(tenantId)]);
      const now: Snapshot = {
        sessions: new Map(sessions.map((s) => [s.id, { status: s.status, sandboxId: s.sandboxId }])),
        checkpoints: new Map(checkpoints.map((c) => [c.id, c.sessionId])),
      };
      const before = watcher.last;
      watcher.last = now;
      // The first look sets what "before" is: subscribers get changes, not the whole state.
      if (!before) return;
      const events: TenantEvent[] = [];
      for (const s of sessions) {
        const was = before.sessions.get(s.id);
        if (!was) events.push({ type: 'session.created', sessionId: s.id, status: s.status, template: s.template, parentCheckpointId: s.parentCheckpointId });
        else if (was.status !== s.status || was.sandboxId !== s.sandboxId)
          events.push({ type: 'session.status', sessionId: s.id, status: s.status, sandboxId: s.sandboxId });
      }
      for (const c of checkpoints)
        if (!before.checkpoints.has(c.id)) events.push({ type: 'checkpoint.created', sessionId: c.sessionId, checkpointId: c.id, kind: c.kind });
      for (const [id, sessionId] of before.checkpoints) if (!now.checkpoints.has(id)) events.push({ type: 'checkpoint.deleted', sessionId, checkpointId: id });
      for (const id of before.sessions.keys()) if (!now.sessions.has(id)) events.push({ type: 'session.deleted', sessionId: id });
      for (const event of events) for (const listener of watcher.listeners) listener(event);
    } catch {
      // The store is away for a moment (STORE_UNAVAILABLE): the next look catches up.
    } finally {
      watcher.busy = false;
    }
  }
}
