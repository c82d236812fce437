import { type NodeHeartbeat, NodeHeartbeatReplySchema } from '@space/protocol';
import type { Logger } from './logger.js';

export interface ClusterHeartbeatOptions {
  /** The control planes' URLs (`SPACE_CONTROL_PLANE_URL`, comma-separated); any one of them takes a heartbeat. */
  controlPlanes: string[];
  /** What heartbeats carry: the node's own credential (`<data>/node/credential`), else the admin key. */
  credential: string;
  /** How often (`SPACE_HEARTBEAT_MS`, default 2000): control planes mark a node lost after `SPACE_NODE_LOST_AFTER_SEC` without one. */
  intervalMs: number;
  /** After how long without an acknowledged heartbeat the node fences itself (`SPACE_NODE_FENCE_AFTER_SEC`, default 6 s). */
  fenceAfterMs: number;
  /** The heartbeat as it is now; `joining` with the sessions the node runs. */
  beat: (joining: boolean) => NodeHeartbeat;
  /** Stops the sessions a control plane said moved away while the node was not heard. */
  stopMoved: (sessionIds: string[]) => Promise<void>;
  /** Cut off: freezes the node's sandboxes. Called again while cut off (for sandboxes started meanwhile). */
  fence: () => Promise<void>;
  /** Heard again, the moved sessions stopped: lets the others run. */
  liftFence: () => Promise<void>;
  log: Logger;
}

/**
 * Registers the node with the cluster's control planes and keeps saying it is alive. Sent to one
 * control plane at a time, moving on to the next when one does not answer; a failure is logged once
 * until a heartbeat gets through again. When it joins (the first heartbeat, and the first after
 * failures: the control planes may have found it lost and moved its sessions) it sends its sessions
 * and stops those the reply names before it counts as joined.
 *
 * Fencing: when no heartbeat was acknowledged for `fenceAfterMs` (less than the control planes'
 * lost delay, which they check), the node fences itself, so the copy cut off stops acting before a
 * control plane may start its session elsewhere. The fence is lifted only by an acknowledged joining
 * heartbeat, after the sessions that moved away were stopped: they never run again here.
 */
export class ClusterHeartbeat {
  private timer: NodeJS.Timeout | null = null;
  private fenceTimer: NodeJS.Timeout | null = null;
  private next = 0;
  private failing = false;
  private joining = true;
  private sending: Promise<void> | null = null;
  private lastAckAt = Date.now();
  private fenced = false;
  private fencing: Promise<void> | null = null;

  constructor(private readonly options: ClusterHeartbeatOptions) {}

  /** Sends the first heartbeat now (resolves once one control plane took it or all refused), then every interval. */
  async start(): Promise<boolean> {
    this.lastAckAt = Date.now();
    // Its own timer: a send can wait seconds on control planes that do not answer.
    this.fenceTimer = setInterval(() => this.checkFence(), Math.min(250, this.options.fenceAfterMs / 4));
    this.fenceTimer.unref();
    const registered = await this.send();
    this.timer = setInterval(() => {
      if (this.sending) return;
      this.sending = this.send().then(() => {
        this.sending = null;
      });
    }, this.options.intervalMs);
    this.timer.unref();
    return registered;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.fenceTimer) clearInterval(this.fenceTimer);
    this.timer = null;
    this.fenceTimer = null;
    await this.sending;
    await this.fencing;
  }

  private checkFence(): void {
    if (this.fencing || Date.now() - this.lastAckAt <= this.options.fenceAfterMs) return;
    if (!this.fenced)
      this.options.log.warn(
        `no control plane acknowledged a heartbeat for ${this.options.fenceAfterMs / 1000} s (SPACE_NODE_FENCE_AFTER_SEC): fencing this node`,
      );
    this.fenced = true;
    this.fencing = this.options
      .fence()
      .catch((err: Error) => this.options.log.error(`fencing: ${err.message}`))
      .finally(() => {
        this.fencing = null;
      });
  }

  private async send(): Promise<boolean> {
    const { controlPlanes, log } = this.options;
    const joining = this.joining;
    const beat = { ...this.options.beat(joining), fenceAfterMs: this.options.fenceAfterMs };
    const errors: string[] = [];
    for (let i = 0; i < controlPlanes.length; i++) {
      const url = controlPlanes[(this.next + i) % controlPlanes.length]!;
      try {
        const res = await this.post(url, beat);
        if (res.ok) {
          this.lastAckAt = Date.now();
          // A control plane older than these replies answers `{ok: true}` only.
          const reply = NodeHeartbeatReplySchema.safeParse(await res.json().catch(() => null));
          if (reply.success && reply.data.stop.length > 0) await this.options.stopMoved(reply.data.stop);
          if (joining) {
            this.joining = false;
            if (this.fenced) await this.lift();
          } else if (this.fenced) this.joining = true; // sent before the fence: the next one joins, naming the sessions
          this.next = (this.next + i) % controlPlanes.length;
          if (this.failing) log.info(`heartbeats reach the control plane again (${url})`);
          this.failing = false;
          return true;
        }
        errors.push(`${url}: ${res.status} ${(await res.text()).slice(0, 300)}`);
      } catch (err) {
        errors.push(`${url}: ${(err as Error).message}`);
      }
    }
    if (!this.failing) log.warn(`no control plane took this node's heartbeat: ${errors.join('; ')}`);
    this.failing = true;
    this.joining = true;
    return false;
  }

  /**
   * The beat to one control plane. One from before 2026-12-07 refuses the fields it does not know
   * (`400`): it gets the beat again without them (it asks the node for what they say itself), so
   * nodes and control planes may be upgraded in any order.
   */
  private async post(url: string, beat: NodeHeartbeat): Promise<Response> {
    const send = (body: NodeHeartbeat) =>
      fetch(`${url.replace(/\/$/, '')}/v1/nodes/heartbeat`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.options.credential}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(Math.max(1000, this.options.intervalMs)),
      });
    const res = await send(beat);
    const { egressUnconfigured, usageBatches, storage, ...older } = beat;
    if (res.status !== 400 || (egressUnconfigured === undefined && usageBatches === undefined && storage === undefined)) return res;
    await res.body?.cancel();
    return send(older);
  }

  private async lift(): Promise<void> {
    await this.fencing;
    this.fenced = false;
    await this.options.liftFence().catch((err: Error) => this.options.log.error(`lifting the fence: ${err.message}`));
  }
}
