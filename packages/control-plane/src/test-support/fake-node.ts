import {
  ErrorCode,
  SpaceError,
  newId,
  type CheckpointKind,
  type NodeCheckpoint,
  type NodeHealth,
  type Placement,
  type ProcessList,
  type SandboxInfo,
  type SessionEgressConfig,
  type StartSandboxRequest,
  type NodeUsageAck,
  type NodeUsageBatch,
} from '@space/protocol';
import type { NodeClient } from '../cluster/node-client.js';

/**
 * A node agent in memory, for unit tests of the control plane's services: sandboxes are records
 * that start, stop and die on request; checkpoints are ids; volumes note whether they changed.
 * Only what the control plane calls is here.
 */
export class FakeNode {
  readonly nodeId = 'node_fake';
  /** Running sandboxes by id. */
  readonly sandboxes = new Map<string, SandboxInfo>();
  readonly checkpoints = new Set<string>();
  /** The full checkpoints' memory images, and the session whose next start a restore made restore one. */
  private readonly memoryImages = new Set<string>();
  private readonly pendingMemory = new Map<string, string>();
  /** Sessions whose volume was written since their last checkpoint. */
  readonly changed = new Set<string>();
  readonly calls: string[] = [];
  /** What the control plane asked about sandboxes' volumes and processes (`changed <session>`, `processes <sandbox>`). */
  readonly asked: string[] = [];
  runningProcesses = false;
  /** Whether the node lists a sandbox quiet after an fs checkpoint taken while no process ran (as real nodes do), until `write`. */
  tracksQuiet = false;
  /** Usage batches the node holds until a control plane acknowledges them. */
  usage: NodeUsageBatch[] = [];
  /** The next acknowledgement fails: the control plane died after storing the batches. */
  failNextAck = false;
  /** How long each full checkpoint paused the sandbox, as the node reports it. */
  fullPauseMs: number | null = null;
  /** Sandbox start and checkpoint times strictly increase, as real ones (tens of ms apart) do: the store orders by them. */
  private lastStamp = 0;

  /** `now`: the clock sandboxes start and checkpoints are taken by (the test's, as the services'). */
  constructor(private readonly now: () => number = Date.now) {}

  private stamp(): string {
    this.lastStamp = Math.max(this.now(), this.lastStamp + 1);
    return new Date(this.lastStamp).toISOString();
  }

  asClient(): NodeClient {
    return this as unknown as NodeClient;
  }

  /** The placements clients were made for, in order (`<session> <epoch>`); the fake is its own placed view. */
  readonly placements: string[] = [];

  placedAt(placement: Placement): NodeClient {
    this.placements.push(`${placement.sessionId} ${placement.epoch}`);
    return this.asClient();
  }

  /** The budgets calls were sent with (`within`), in order. */
  readonly budgetsMs: number[] = [];

  within(ms: number): NodeClient {
    this.budgetsMs.push(ms);
    return this.asClient();
  }

  /** The sandbox dies without the control plane being told (a crash, an OOM kill). */
  killBehindTheScenes(sandboxId: string): void {
    this.sandboxes.delete(sandboxId);
  }

  async health(): Promise<NodeHealth> {
    return {
      nodeId: this.nodeId,
      templates: ['tiny'],
      sandboxes: this.sandboxes.size,
      pool: {},
      templateImages: [],
      starts: {},
      egressUnconfigured: [],
      usageBatches: this.usage.length,
      capacity: { memoryMb: 4096, cpus: 2 },
      gatewayRequests: {},
      storage: { status: 'ok', hostFreeBytes: null },
    };
  }

  /** Times the node was asked what it runs. */
  listings = 0;
  /** Thrown by each list while set (a node that beats but cannot say what it runs). */
  listError: Error | null = null;

  async listSandboxes(): Promise<SandboxInfo[]> {
    this.listings++;
    if (this.listError) throw this.listError;
    // Copies, as a real node's answer is: what the node does later is not in a list read before.
    return [...this.sandboxes.values()].map((info) => ({ ...info }));
  }

  /** Starts to refuse before they begin (as when the node is lost), counted down. */
  failingStarts = 0;

  async startSandbox(request: StartSandboxRequest): Promise<SandboxInfo> {
    this.calls.push(`start ${request.sessionId}`);
    if (this.failingStarts > 0) {
      this.failingStarts--;
      throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, 'the node did not answer');
    }
    if (request.egress) this.egress.set(request.sessionId, request.egress);
    const info: SandboxInfo = {
      sandboxId: newId('sbx'),
      sessionId: request.sessionId,
      nodeId: this.nodeId,
      template: request.template,
      startedAt: this.stamp(),
      running: true,
      restoredFrom: this.pendingMemory.get(request.sessionId) ?? null,
      note: null,
    };
    this.pendingMemory.delete(request.sessionId);
    this.sandboxes.set(info.sandboxId, info);
    return info;
  }

  async sandboxInfo(sandboxId: string): Promise<SandboxInfo> {
    const info = this.sandboxes.get(sandboxId);
    if (!info) throw new SpaceError(ErrorCode.SANDBOX_NOT_FOUND, `sandbox ${sandboxId} is not running`);
    return info;
  }

  async stopSandbox(sandboxId: string): Promise<void> {
    this.calls.push(`stop ${sandboxId}`);
    this.sandboxes.delete(sandboxId);
  }

  /** Something came into the session's sandbox and wrote its volume. */
  write(sessionId: string): void {
    this.changed.add(sessionId);
    for (const info of this.sandboxes.values()) if (info.sessionId === sessionId) info.quietSince = null;
  }

  async processes(sandboxId: string): Promise<ProcessList> {
    this.asked.push(`processes ${sandboxId}`);
    return {
      processes: this.runningProcesses ? [{ pid: 7, cmd: 'sleep 600', startedAt: new Date().toISOString(), running: true, exitCode: null, pty: false }] : [],
    };
  }

  async checkpoint(sessionId: string, checkpointId: string, kind: CheckpointKind): Promise<NodeCheckpoint> {
    this.calls.push(`checkpoint ${kind} ${sessionId}`);
    this.checkpoints.add(checkpointId);
    if (kind === 'full') this.memoryImages.add(checkpointId);
    this.changed.delete(sessionId);
    const quiet = this.tracksQuiet && kind === 'fs' && !this.runningProcesses;
    for (const info of this.sandboxes.values()) if (info.sessionId === sessionId) info.quietSince = quiet ? checkpointId : null;
    return {
      checkpointId,
      kind,
      createdAt: this.stamp(),
      sizeBytes: null,
      pauseMs: kind === 'full' ? this.fullPauseMs : null,
    };
  }

  async volumeChanged(sessionId: string): Promise<boolean> {
    this.asked.push(`changed ${sessionId}`);
    return this.changed.has(sessionId);
  }

  async restoreVolume(sessionId: string, checkpointId: string): Promise<void> {
    if (!this.checkpoints.has(checkpointId)) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${checkpointId} is not on this node`);
    this.calls.push(`restore ${sessionId} ${checkpointId}`);
    if (this.memoryImages.has(checkpointId)) this.pendingMemory.set(sessionId, checkpointId);
    for (const [id, info] of this.sandboxes) if (info.sessionId === sessionId) this.sandboxes.delete(id);
  }

  async deleteVolume(sessionId: string): Promise<void> {
    this.calls.push(`delete ${sessionId}`);
    for (const [id, info] of this.sandboxes) if (info.sessionId === sessionId) this.sandboxes.delete(id);
  }

  /** While set, listing the node's checkpoints waits for it (a sweep that asks a slow node). */
  checkpointListHeld: Promise<void> | null = null;

  async listCheckpoints(): Promise<{ checkpoints: { id: string; createdAt: string }[] }> {
    await this.checkpointListHeld;
    return { checkpoints: [...this.checkpoints].map((id) => ({ id, createdAt: new Date().toISOString() })) };
  }

  async deleteCheckpoint(checkpointId: string): Promise<void> {
    this.checkpoints.delete(checkpointId);
  }

  readonly templates = new Set<string>();

  async createTemplate(templateId: string, checkpointId: string): Promise<void> {
    if (!this.checkpoints.has(checkpointId)) throw new SpaceError(ErrorCode.CHECKPOINT_NOT_FOUND, `checkpoint ${checkpointId} is not on this node`);
    this.templates.add(templateId);
  }

  async deleteTemplate(templateId: string): Promise<void> {
    this.templates.delete(templateId);
  }

  /** The egress settings each session's sandbox was last given (what its gateway would inject). */
  readonly egress = new Map<string, SessionEgressConfig>();

  async configureEgress(sessionId: string, config: SessionEgressConfig): Promise<void> {
    this.egress.set(sessionId, config);
  }

  /** Calls are answered in-process: none waits on a connection, none fails to open one. */
  waitingCalls(): number {
    return 0;
  }

  silentMs(): number {
    return 0;
  }

  failedConnections(): number {
    return 0;
  }

  close(): void {}

  /** Times a control plane asked for the usage batches. */
  usageAsked = 0;
  /** While set, the usage batches are handed over only once it resolves. */
  usageHeld: Promise<void> | null = null;

  async usageBatches(): Promise<NodeUsageBatch[]> {
    this.usageAsked++;
    await this.usageHeld;
    return [...this.usage];
  }

  async ackUsage(ack: NodeUsageAck): Promise<void> {
    if (this.failNextAck) {
      this.failNextAck = false;
      throw new SpaceError(ErrorCode.NODE_UNAVAILABLE, 'the control plane died before acknowledging');
    }
    this.usage = this.usage.filter((b) => b.ledger !== ack.ledger || b.seq > ack.through);
  }
}
