import { type NodeHeartbeat, NodeHeartbeatReplySchema } from '@space/protocol';
import type { Logger } from './logger.js';

export interface ClusterHeartbeatOptions {
  /** The control planes' URLs (`SPACE_CONTROL_PLANE_URL`, comma-separated); any one of them takes a heartbeat. */
  controlPlanes: string[];
  /** The admin key the control planes accept heartbeats with (`SPACE_API_KEY`). */
  apiKey: string;
  /** How often (`SPACE_HEARTBEAT_MS`, default 2000): control planes mark a node lost after `SPACE_NODE_LOST_AFTER_SEC` without one. */
  intervalMs: number;
  /** The heartbeat as it is now; `joining` with the sessions the node runs. */
  beat: (joining: boolean) => NodeHeartbeat;
  /** Stops the sessions a control plane said moved away while the node was not heard. */
  stopMoved: (sessionIds: string[]) => Promise<void>;
  log: Logger;
}

/**
 * Registers the node with the cluster's control planes and keeps saying it is alive. Sent to one
 * control plane at a time, moving on to the next when one does not answer; a failure is logged once
 * until a heartbeat gets through again. When it joins (the first heartbeat, and the first after
 * failures: the control planes may have found it lost and moved its sessions) it sends its sessions
 * and stops those the reply names before it counts as joined.
 */
export class ClusterHeartbeat {
  private timer: NodeJS.Timeout | null = null;
  private next = 0;
  private failing = false;
  private joining = true;
  private sending: Promise<void> | null = null;

  constructor(private readonly options: ClusterHeartbeatOptions) {}

  /** Sends the first heartbeat now (resolves once one control plane took it or all refused), then every interval. */
  async start(): Promise<boolean> {
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
    this.timer = null;
    await this.sending;
  }

  private async send(): Promise<boolean> {
    const { controlPlanes, apiKey, log } = this.options;
    const joining = this.joining;
    const body = JSON.stringify(this.options.beat(joining));
    const errors: string[] = [];
    for (let i = 0; i < controlPlanes.length; i++) {
      const url = controlPlanes[(this.next + i) % controlPlanes.length]!;
      try {
        const res = await fetch(`${url.replace(/\/$/, '')}/v1/nodes/heartbeat`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body,
          signal: AbortSignal.timeout(Math.max(1000, this.options.intervalMs)),
        });
        if (res.ok) {
          // A control plane older than these replies answers `{ok: true}` only.
          const reply = NodeHeartbeatReplySchema.safeParse(await res.json().catch(() => null));
          if (reply.success && reply.data.stop.length > 0) await this.options.stopMoved(reply.data.stop);
          if (joining) this.joining = false;
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
}
