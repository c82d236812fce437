import type { z } from 'zod';
import type { Readable } from 'node:stream';
import {
  NodeImageImportedSchema,
  type TemplateConfig,
  type NodeCreateVolumeRequest,
  NodeVolumeUsageSchema,
  EgressAuditListSchema,
  ErrorCode,
  OkSchema,
  type SessionEgressConfig,
  NodeCheckpointSchema,
  NodeHealthSchema,
  SandboxInfoSchema,
  SandboxInfoListSchema,
  SandboxMetricsSchema,
  type SandboxMetrics,
  ListeningPortsSchema,
  type ListeningPort,
  type Service,
  ServiceStoppedSchema,
  ProcessListSchema,
  type ProcessList,
  type CheckpointKind,
  type SandboxRoute,
  NodeCheckpointListSchema,
  NodeVolumeChangedSchema,
  type NodeCheckpoint,
  type NodeCheckpointList,
  type NodeHealth,
  type SandboxInfo,
  type StartSandboxRequest,
  NodeShippedSchema,
  type ShipBase,
  type StoredObject,
  StoredObjectSchema,
} from '@space/protocol';
import { Upstream, forwardRoute, routePath, type HttpSandboxRoute, type ProxyTarget, type RequestContext, type UpgradeContext } from '@space/server-kit';
import type { WebSocket } from 'ws';

/** The control plane's side of the node API: every operation the control plane asks of a node. */
export class NodeClient {
  private readonly upstream: Upstream;

  constructor(
    readonly nodeId: string,
    private readonly url: string,
    private readonly token: string,
  ) {
    this.upstream = new Upstream(url, token, ErrorCode.NODE_UNAVAILABLE, `node ${nodeId}`);
  }

  /**
   * Where a preview request for `port` of the sandbox goes on this node (path and query after the
   * port), with the node's token; `drop`: client headers not passed on (its cookies come in `headers`).
   */
  portTarget(sandboxId: string, port: number, pathAndQuery: string, headers: Record<string, string>, drop: string[] = []): ProxyTarget {
    const { hostname, port: nodePort } = new URL(this.url);
    return {
      host: hostname.replace(/^\[|\]$/g, ''),
      port: Number(nodePort || 80),
      path: `${this.sandboxPath(sandboxId, `/ports/${port}`)}${pathAndQuery}`,
      headers: { ...headers, authorization: `Bearer ${this.token}` },
      // The client's cookies come in `headers`, SPACE's token taken out.
      drop: ['cookie', ...drop],
    };
  }

  /** Starts a service in the running sandbox now. */
  async startService(sandboxId: string, service: Service): Promise<void> {
    await this.upstream.json('POST', this.sandboxPath(sandboxId, '/services'), service, OkSchema);
  }

  /** Stops a service running in the sandbox; whether one ran. */
  async stopService(sandboxId: string, name: string): Promise<boolean> {
    return (await this.upstream.json('DELETE', this.sandboxPath(sandboxId, `/services/${name}`), undefined, ServiceStoppedSchema)).stopped;
  }

  /** The ports something listens on in the sandbox. */
  async listeningPorts(sandboxId: string): Promise<ListeningPort[]> {
    return (await this.upstream.json('GET', this.sandboxPath(sandboxId, '/ports'), undefined, ListeningPortsSchema)).ports;
  }

  health(): Promise<NodeHealth> {
    return this.upstream.json('GET', '/node/v1/health', undefined, NodeHealthSchema, { timeoutMs: 5000 });
  }

  startSandbox(request: StartSandboxRequest): Promise<SandboxInfo> {
    return this.upstream.json('POST', '/node/v1/sandboxes', request, SandboxInfoSchema);
  }

  /** The sandboxes serving sessions on the node now. */
  async listSandboxes(): Promise<SandboxInfo[]> {
    return (await this.upstream.json('GET', '/node/v1/sandboxes', undefined, SandboxInfoListSchema, { timeoutMs: 10_000 })).sandboxes;
  }

  /** The processes the sandbox's daemon started. */
  processes(sandboxId: string): Promise<ProcessList> {
    return this.upstream.json('GET', this.sandboxPath(sandboxId, '/processes'), undefined, ProcessListSchema);
  }

  sandboxInfo(sandboxId: string): Promise<SandboxInfo> {
    return this.upstream.json('GET', `/node/v1/sandboxes/${encodeURIComponent(sandboxId)}`, undefined, SandboxInfoSchema);
  }

  /** What the sandbox uses now (CPU over a short window, memory, disk). */
  sandboxMetrics(sandboxId: string): Promise<SandboxMetrics> {
    return this.upstream.json('GET', `/node/v1/sandboxes/${encodeURIComponent(sandboxId)}/metrics`, undefined, SandboxMetricsSchema);
  }

  stopSandbox(sandboxId: string): Promise<unknown> {
    return this.upstream.json('DELETE', `/node/v1/sandboxes/${encodeURIComponent(sandboxId)}`, undefined, OkSchema);
  }

  deleteVolume(sessionId: string): Promise<unknown> {
    return this.upstream.json('DELETE', `/node/v1/volumes/${encodeURIComponent(sessionId)}`, undefined, OkSchema);
  }

  /** `volumes`: the session's read-write volumes, copied with the checkpoint. */
  checkpoint(sessionId: string, checkpointId: string, kind: CheckpointKind, volumes: string[] = []): Promise<NodeCheckpoint> {
    return this.upstream.json('POST', `/node/v1/volumes/${encodeURIComponent(sessionId)}/checkpoints`, { checkpointId, kind, volumes }, NodeCheckpointSchema);
  }

  createNamedVolume(request: NodeCreateVolumeRequest): Promise<unknown> {
    return this.upstream.json('POST', '/node/v1/named-volumes', request, OkSchema);
  }

  deleteNamedVolume(volumeId: string): Promise<unknown> {
    return this.upstream.json('DELETE', `/node/v1/named-volumes/${encodeURIComponent(volumeId)}`, undefined, OkSchema);
  }

  async namedVolumeUsage(volumeId: string): Promise<z.infer<typeof NodeVolumeUsageSchema>['usage']> {
    return (await this.upstream.json('GET', `/node/v1/named-volumes/${encodeURIComponent(volumeId)}/usage`, undefined, NodeVolumeUsageSchema)).usage;
  }

  /** `flushSession`: the session mounting it read-write, whose sandbox's writes are synced first. */
  snapshotNamedVolume(volumeId: string, snapshotId: string, flushSession?: string): Promise<unknown> {
    return this.upstream.json('POST', `/node/v1/named-volumes/${encodeURIComponent(volumeId)}/snapshots`, { snapshotId, flushSession }, OkSchema);
  }

  /** Puts a checkpoint's copy of `sourceVolumeId` in place of the volume's files. */
  restoreNamedVolume(volumeId: string, checkpointId: string, sourceVolumeId: string): Promise<unknown> {
    return this.upstream.json('POST', `/node/v1/named-volumes/${encodeURIComponent(volumeId)}/restore`, { checkpointId, sourceVolumeId }, OkSchema);
  }

  deleteVolumeSnapshot(snapshotId: string): Promise<unknown> {
    return this.upstream.json('DELETE', `/node/v1/volume-snapshots/${encodeURIComponent(snapshotId)}`, undefined, OkSchema);
  }

  /**
   * Stops the session's sandbox and replaces (or creates) its volume from a checkpoint; from a full
   * checkpoint, the next sandbox starts from its memory.
   */
  restoreVolume(sessionId: string, checkpointId: string): Promise<unknown> {
    return this.upstream.json('POST', `/node/v1/volumes/${encodeURIComponent(sessionId)}/restore`, { checkpointId }, OkSchema);
  }

  /** Whether the session's volume was written since `checkpointId` was taken of it (true when unknown). */
  async volumeChanged(sessionId: string, checkpointId: string): Promise<boolean> {
    const { changed } = await this.upstream.json(
      'GET',
      `/node/v1/volumes/${encodeURIComponent(sessionId)}/changed?since=${encodeURIComponent(checkpointId)}`,
      undefined,
      NodeVolumeChangedSchema,
    );
    return changed;
  }

  listCheckpoints(): Promise<NodeCheckpointList> {
    return this.upstream.json('GET', '/node/v1/checkpoints', undefined, NodeCheckpointListSchema);
  }

  deleteCheckpoint(checkpointId: string): Promise<unknown> {
    return this.upstream.json('DELETE', `/node/v1/checkpoints/${encodeURIComponent(checkpointId)}`, undefined, OkSchema);
  }

  /** Makes `baseId` a full copy of a checkpoint on the node in the object store. */
  createBase(baseId: string, fromCheckpointId: string): Promise<StoredObject> {
    return this.upstream.json('POST', '/node/v1/bases', { baseId, fromCheckpointId }, StoredObjectSchema);
  }

  deleteBase(baseId: string): Promise<unknown> {
    return this.upstream.json('DELETE', `/node/v1/bases/${encodeURIComponent(baseId)}`, undefined, OkSchema);
  }

  /** Stores a checkpoint on the node in the object store as its difference to `base`. */
  async shipCheckpoint(checkpointId: string, base: ShipBase): Promise<StoredObject[]> {
    return (await this.upstream.json('POST', `/node/v1/checkpoints/${encodeURIComponent(checkpointId)}/ship`, { base }, NodeShippedSchema)).objects;
  }

  /** Brings a checkpoint from the object store onto the node (its base first). */
  fetchCheckpoint(checkpointId: string, base: ShipBase, objects: StoredObject[]): Promise<unknown> {
    return this.upstream.json('POST', `/node/v1/checkpoints/${encodeURIComponent(checkpointId)}/fetch`, { base, objects }, OkSchema);
  }

  deleteObjects(keys: string[]): Promise<unknown> {
    return this.upstream.json('POST', '/node/v1/objects/delete', { keys }, OkSchema);
  }

  /** Makes template version `templateId` from a checkpoint on the node. */
  createTemplate(templateId: string, checkpointId: string): Promise<unknown> {
    return this.upstream.json('POST', '/node/v1/templates', { templateId, checkpointId }, OkSchema);
  }

  /** Makes template version `templateId` from an image archive streamed to the node; the image's config comes back. */
  async importImage(templateId: string, archive: Readable, length: string | undefined): Promise<TemplateConfig> {
    const headers: Record<string, string> = { 'content-type': 'application/x-tar', ...(length ? { 'content-length': length } : {}) };
    const reply = await this.upstream.send('POST', `/node/v1/templates/${encodeURIComponent(templateId)}/image`, archive, headers);
    return (await this.upstream.readJsonReply(reply, NodeImageImportedSchema, 1024 * 1024)).config;
  }

  /** Makes template version `templateId` from an image in a registry (`docker://…`), where the node can reach one. */
  async pullImage(templateId: string, image: string): Promise<TemplateConfig> {
    return (
      await this.upstream.json('POST', `/node/v1/templates/${encodeURIComponent(templateId)}/pull`, { image }, NodeImageImportedSchema, {
        timeoutMs: 3_600_000,
      })
    ).config;
  }

  deleteTemplate(templateId: string): Promise<unknown> {
    return this.upstream.json('DELETE', `/node/v1/templates/${encodeURIComponent(templateId)}`, undefined, OkSchema);
  }

  configureEgress(sessionId: string, config: SessionEgressConfig): Promise<unknown> {
    return this.upstream.json('PUT', `/node/v1/sessions/${encodeURIComponent(sessionId)}/egress`, config, OkSchema);
  }

  egressAudit(sessionId: string, limit: number): Promise<z.infer<typeof EgressAuditListSchema>> {
    return this.upstream.json('GET', `/node/v1/sessions/${encodeURIComponent(sessionId)}/egress/audit?limit=${limit}`, undefined, EgressAuditListSchema);
  }

  /** Forwards a validated sandbox operation of the public API to the sandbox and relays the reply. */
  forward(route: HttpSandboxRoute, ctx: RequestContext, input: { body: unknown }, sandboxId: string): Promise<void> {
    return forwardRoute(route, ctx, input, this.upstream, this.sandboxPath(sandboxId, routePath(route, ctx.params)));
  }

  /** Opens the sandbox's stream for a public WebSocket route (its path and query as the client asked). */
  socket(route: SandboxRoute, ctx: UpgradeContext, sandboxId: string): WebSocket {
    return this.upstream.socket(this.sandboxPath(sandboxId, routePath(route, ctx.params)) + ctx.url.search);
  }

  private sandboxPath(sandboxId: string, opPath: string): string {
    return `/node/v1/sandboxes/${encodeURIComponent(sandboxId)}${opPath}`;
  }

  close(): void {
    this.upstream.close();
  }
}
