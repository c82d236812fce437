import { ErrorCode, SpaceError } from '@space/protocol';
import type { Upstream } from '@space/server-kit';
import type { SandboxRecord } from '../sandbox-record.js';
import type { InboundConnections } from './inbound-connections.js';
import type { SandboxEntries } from './sandbox-entries.js';

/** A sandbox this node agent runs. */
export interface LiveSandbox {
  record: SandboxRecord;
  daemon: Upstream;
  /** The node's connections into the sandbox's ports (preview URLs). */
  inbound: InboundConnections;
  /** Host pid of the sandbox process: its disappearance means the sandbox died. */
  pid: number | null;
  /** A daemon call the sandbox is busy with (a full checkpoint's pause, a claim's rebind); calls wait for it. */
  pendingCall: Promise<unknown> | null;
  /** Calls forwarded to its daemon and not answered yet: a full checkpoint waits for them (its quiesce would cut them). */
  callsInFlight: number;
  /** The calls and streams that came in, to say when nothing could have written its volume since a checkpoint. */
  entries: SandboxEntries;
  /** When its daemon, found not answering a call, was last continued (`Date.now()`); found so again soon after, the sandbox is stopped. */
  revivedAt?: number;
}

/** Pooled sandboxes serve a placeholder "session" with this prefix until claimed. */
export const unclaimedPrefix = 'pool';

export function isUnclaimed(record: SandboxRecord): boolean {
  return record.sessionId.startsWith(`${unclaimedPrefix}_`);
}

/** The sandboxes running on this node, by sandbox id, with the lookups every part of the node needs. */
export class LiveSandboxes {
  private readonly bySandbox = new Map<string, LiveSandbox>();

  constructor(private readonly nodeId: string) {}

  add(live: LiveSandbox): void {
    this.bySandbox.set(live.record.sandboxId, live);
  }

  /** Forgets the sandbox; returns it if it was there. */
  remove(sandboxId: string): LiveSandbox | undefined {
    const live = this.bySandbox.get(sandboxId);
    this.bySandbox.delete(sandboxId);
    return live;
  }

  find(sandboxId: string): LiveSandbox | undefined {
    return this.bySandbox.get(sandboxId);
  }

  /** The sandbox, or SANDBOX_NOT_FOUND. */
  get(sandboxId: string): LiveSandbox {
    const found = this.bySandbox.get(sandboxId);
    if (!found) throw new SpaceError(ErrorCode.SANDBOX_NOT_FOUND, `sandbox ${sandboxId} is not running on node ${this.nodeId}`);
    return found;
  }

  /** The sandbox serving a session, if any. */
  forSession(sessionId: string): LiveSandbox | undefined {
    for (const live of this.bySandbox.values()) if (live.record.sessionId === sessionId) return live;
    return undefined;
  }

  /** The sandbox whose address is `ip`, if any (the gateway asks who sent a packet). */
  atAddress(ip: string): LiveSandbox | undefined {
    for (const live of this.bySandbox.values()) if (live.record.sandboxIp === ip) return live;
    return undefined;
  }

  all(): LiveSandbox[] {
    return [...this.bySandbox.values()];
  }

  ids(): string[] {
    return [...this.bySandbox.keys()];
  }
}
