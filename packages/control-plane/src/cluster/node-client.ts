import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import {
  type ApiRoute,
  type CheckpointDiff,
  type CheckpointKind,
  type FileList,
  type FileStat,
  type ListeningPort,
  type NodeCheckpoint,
  type NodeCheckpointList,
  type NodeCreateVolumeRequest,
  type NodeHealth,
  ErrorCode,
  isSpaceError,
  DesktopVncSchema,
  ExecResultSchema,
  FileStatSchema,
  ProcessListSchema,
  type ProcessList,
  type RouteCall,
  type RouteReply,
  type SandboxInfo,
  type SandboxMetrics,
  type SandboxRoute,
  type Service,
  type SessionEgressConfig,
  type ShipBase,
  type StartSandboxRequest,
  type NodeUsageAck,
  type NodeUsageBatch,
  type StoredObject,
  type DataKey,
  CALL_TIMEOUT_HEADER,
  PLACEMENT_HEADER,
  type Placement,
  placementHeaderValue,
  type TemplateConfig,
  nodeRoutes,
  nodeSandboxPrefix,
  routeUrl,
} from '@space/protocol';
import {
  type ClientTls,
  Upstream,
  forwardRoute,
  routePath,
  type HttpSandboxRoute,
  type ProxyTarget,
  type RequestContext,
  type UpgradeContext,
} from '@space/server-kit';
import type { WebSocket } from 'ws';
import type { z } from 'zod';

/**
 * The control plane's side of the node API: every operation the control plane asks of a node. A
 * client `placedAt` a session's placement names it in every call (protocol's placement.ts), so the
 * node refuses them once it has seen a newer one.
 */
export class NodeClient {
  private readonly upstream: Upstream;
  /** Sent with every call: the placement this client was made for (none for the node's own client). */
  private readonly headers: Record<string, string>;

  constructor(
    readonly nodeId: string,
    private readonly url: string,
    private readonly token: string,
    /** For a node API served over `https://`: the cluster CA its certificate must be signed by, and the client certificate presented. */
    private readonly tls?: ClientTls,
    /** Another client's view for some calls: its connections, and the headers these calls carry. */
    view?: { upstream: Upstream; headers: Record<string, string> },
  ) {
    this.upstream = view?.upstream ?? new Upstream(url, token, ErrorCode.NODE_UNAVAILABLE, `node ${nodeId}`, undefined, tls);
    this.headers = view?.headers ?? {};
  }

  /** This node, for calls about the session at `placement` (sharing this client's connections). */
  placedAt(placement: Placement): NodeClient {
    return this.with({ [PLACEMENT_HEADER]: placementHeaderValue(placement) });
  }

  /**
   * This node, for one call its client gives `ms` more (`x-space-timeout-ms`): one that waits on the
   * node past it (behind a full checkpoint's pause) is dropped there, unrun.
   */
  within(ms: number): NodeClient {
    return this.with({ [CALL_TIMEOUT_HEADER]: String(Math.max(1, Math.floor(ms))) });
  }

  private with(headers: Record<string, string>): NodeClient {
    return new NodeClient(this.nodeId, this.url, this.token, this.tls, { upstream: this.upstream, headers: { ...this.headers, ...headers } });
  }

  /**
   * Where a preview request for `port` of the sandbox goes on this node (path and query after the
   * port), with the node's token; `drop`: client headers not passed on (its cookies come in `headers`).
   */
  portTarget(sandboxId: string, port: number, pathAndQuery: string, headers: Record<string, string>, drop: string[] = []): ProxyTarget {
    const { hostname, port: nodePort, protocol } = new URL(this.url);
    const tls = protocol === 'https:';
    return {
      host: hostname.replace(/^\[|\]$/g, ''),
      port: Number(nodePort || (tls ? 443 : 80)),
      // An https:// node is reached over TLS also without the cluster CA (then the system's CAs check it).
      ...(tls ? { tls: this.tls ?? {} } : {}),
      path: `${this.sandboxPath(sandboxId, `/ports/${port}`)}${pathAndQuery}`,
      headers: { ...headers, ...this.headers, authorization: `Bearer ${this.token}` },
      // The client's cookies come in `headers`, SPACE's token taken out.
      drop: ['cookie', ...drop],
    };
  }

  /** One operation of the node API, as protocol's `nodeRoutes` declares it; its reply checked with the route's schema. */
  private call<R extends ApiRoute>(route: R, ...[input]: unknown extends RouteCall<R> ? [RouteCall<R>?] : [RouteCall<R>]): Promise<RouteReply<R>> {
    const { params, body, query } = (input ?? {}) as { params?: Record<string, string>; body?: unknown; query?: Record<string, unknown> };
    return this.upstream.json(route.method, routeUrl(route, params, query), body, route.response, {
      headers: this.headers,
      ...(route.timeoutMs ? { timeoutMs: route.timeoutMs } : {}),
      ...(route.replyLimitBytes ? { limit: route.replyLimitBytes } : {}),
    });
  }

  /** Starts a service in the running sandbox now. */
  async startService(sandboxId: string, service: Service): Promise<void> {
    await this.call(nodeRoutes.startService, { params: { sandboxId }, body: service });
  }

  /** Stops a service running in the sandbox; whether one ran. */
  async stopService(sandboxId: string, name: string): Promise<boolean> {
    return (await this.call(nodeRoutes.stopService, { params: { sandboxId, name } })).stopped;
  }

  /** The ports something listens on in the sandbox. */
  async listeningPorts(sandboxId: string): Promise<ListeningPort[]> {
    return (await this.call(nodeRoutes.listeningPorts, { params: { sandboxId } })).ports;
  }

  health(): Promise<NodeHealth> {
    return this.call(nodeRoutes.health);
  }

  /** The usage batches the node measured and no control plane acknowledged yet, oldest first. */
  async usageBatches(): Promise<NodeUsageBatch[]> {
    return (await this.call(nodeRoutes.usageBatches)).batches;
  }

  /** The node's batches through `through` are stored: it forgets them. */
  async ackUsage(ack: NodeUsageAck): Promise<void> {
    await this.call(nodeRoutes.ackUsage, { body: ack });
  }

  startSandbox(request: StartSandboxRequest): Promise<SandboxInfo> {
    return this.call(nodeRoutes.startSandbox, { body: request });
  }

  /** The sandboxes serving sessions on the node now. */
  async listSandboxes(): Promise<SandboxInfo[]> {
    return (await this.call(nodeRoutes.listSandboxes)).sandboxes;
  }

  /** The processes the sandbox's daemon started (a sandbox operation, relayed by the node). */
  processes(sandboxId: string): Promise<ProcessList> {
    return this.upstream.json('GET', this.sandboxPath(sandboxId, '/processes'), undefined, ProcessListSchema, { headers: this.headers });
  }

  sandboxInfo(sandboxId: string): Promise<SandboxInfo> {
    return this.call(nodeRoutes.sandboxInfo, { params: { sandboxId } });
  }

  /** What the sandbox uses now (CPU over a short window, memory, disk). */
  sandboxMetrics(sandboxId: string): Promise<SandboxMetrics> {
    return this.call(nodeRoutes.sandboxMetrics, { params: { sandboxId } });
  }

  stopSandbox(sandboxId: string): Promise<unknown> {
    return this.call(nodeRoutes.stopSandbox, { params: { sandboxId } });
  }

  deleteVolume(sessionId: string): Promise<unknown> {
    return this.call(nodeRoutes.deleteVolume, { params: { sessionId } });
  }

  /** `volumes`: the session's read-write volumes, copied with the checkpoint. */
  checkpoint(sessionId: string, checkpointId: string, kind: CheckpointKind, volumes: string[] = []): Promise<NodeCheckpoint> {
    return this.call(nodeRoutes.checkpoint, { params: { sessionId }, body: { checkpointId, kind, volumes } });
  }

  createNamedVolume(request: NodeCreateVolumeRequest): Promise<unknown> {
    return this.call(nodeRoutes.createNamedVolume, { body: request });
  }

  deleteNamedVolume(volumeId: string): Promise<unknown> {
    return this.call(nodeRoutes.deleteNamedVolume, { params: { volumeId } });
  }

  async namedVolumeUsage(volumeId: string): Promise<RouteReply<typeof nodeRoutes.namedVolumeUsage>['usage']> {
    return (await this.call(nodeRoutes.namedVolumeUsage, { params: { volumeId } })).usage;
  }

  /** `flushSession`: the session mounting it read-write, whose sandbox's writes are synced first. */
  snapshotNamedVolume(volumeId: string, snapshotId: string, flushSession?: string): Promise<unknown> {
    return this.call(nodeRoutes.snapshotNamedVolume, { params: { volumeId }, body: { snapshotId, flushSession } });
  }

  /** Puts a checkpoint's copy of `sourceVolumeId` in place of the volume's files. */
  restoreNamedVolume(volumeId: string, checkpointId: string, sourceVolumeId: string): Promise<unknown> {
    return this.call(nodeRoutes.restoreNamedVolume, { params: { volumeId }, body: { checkpointId, sourceVolumeId } });
  }

  deleteVolumeSnapshot(snapshotId: string): Promise<unknown> {
    return this.call(nodeRoutes.deleteVolumeSnapshot, { params: { snapshotId } });
  }

  /**
   * Stops the session's sandbox and replaces (or creates) its volume from a checkpoint; from a full
   * checkpoint, the next sandbox starts from its memory.
   */
  restoreVolume(sessionId: string, checkpointId: string): Promise<unknown> {
    return this.call(nodeRoutes.restoreVolume, { params: { sessionId }, body: { checkpointId } });
  }

  /** Whether the session's volume was written since `checkpointId` was taken of it (true when unknown). */
  async volumeChanged(sessionId: string, checkpointId: string): Promise<boolean> {
    return (await this.call(nodeRoutes.volumeChanged, { params: { sessionId }, query: { since: checkpointId } })).changed;
  }

  listCheckpoints(): Promise<NodeCheckpointList> {
    return this.call(nodeRoutes.listCheckpoints);
  }

  /** Sends a checkpoint's file to `res` as a download (bytes, with their length). */
  checkpointFile(checkpointId: string, path: string, res: ServerResponse): Promise<void> {
    return this.upstream.download(routeUrl(nodeRoutes.checkpointFile, { checkpointId }, { path }), res, this.headers);
  }

  checkpointFileList(checkpointId: string, path: string): Promise<FileList> {
    return this.call(nodeRoutes.checkpointFileList, { params: { checkpointId }, query: { path } });
  }

  checkpointFileStat(checkpointId: string, path: string): Promise<FileStat> {
    return this.call(nodeRoutes.checkpointFileStat, { params: { checkpointId }, query: { path } });
  }

  /** A checkpoint's file as a stream with its length (to copy it elsewhere). */
  async checkpointFileStream(checkpointId: string, path: string): Promise<{ stream: Readable; length: number }> {
    const res = await this.upstream.send('GET', routeUrl(nodeRoutes.checkpointFile, { checkpointId }, { path }), undefined, this.headers);
    if (res.statusCode !== 200) throw await this.upstream.errorFrom(res);
    return { stream: res, length: Number(res.headers['content-length']) };
  }

  /** Writes a file in the sandbox from a stream of `length` bytes (atomically: the agent renames it into place). */
  async sandboxUpload(sandboxId: string, path: string, body: Readable, length: number): Promise<FileStat> {
    const headers = { ...this.headers, 'content-type': 'application/octet-stream', 'content-length': String(length) };
    const res = await this.upstream.send('PUT', this.sandboxPath(sandboxId, `/files?path=${encodeURIComponent(path)}`), body, headers);
    return this.upstream.readJsonReply(res, FileStatSchema, 64 * 1024);
  }

  /** Runs a command in the sandbox to its end (argv, no shell). */
  sandboxExec(sandboxId: string, cmd: string[]): Promise<z.output<typeof ExecResultSchema>> {
    return this.upstream.json('POST', this.sandboxPath(sandboxId, '/exec'), { cmd }, ExecResultSchema, { headers: this.headers });
  }

  /** Starts the live view's servers on the sandbox's desktop (or finds them running); answers the port noVNC is served on. */
  sandboxDesktopVnc(sandboxId: string, viewOnly: boolean): Promise<z.output<typeof DesktopVncSchema>> {
    return this.upstream.json('POST', this.sandboxPath(sandboxId, '/desktop/vnc'), { viewOnly }, DesktopVncSchema, { headers: this.headers });
  }

  /** One page of what differs between two checkpoints on this node. */
  checkpointDiff(checkpointId: string, query: { to: string; after?: string; limit?: number }): Promise<CheckpointDiff> {
    return this.call(nodeRoutes.checkpointDiff, { params: { checkpointId }, query });
  }

  /** The path in each of these checkpoints (all on this node). */
  async pathVersions(checkpointIds: string[], path: string): Promise<RouteReply<typeof nodeRoutes.pathVersions>['versions']> {
    return (await this.call(nodeRoutes.pathVersions, { body: { checkpointIds, path } })).versions;
  }

  deleteCheckpoint(checkpointId: string): Promise<unknown> {
    return this.call(nodeRoutes.deleteCheckpoint, { params: { checkpointId } });
  }

  /** Makes `baseId` a full copy of a checkpoint on the node in the object store. */
  createBase(baseId: string, fromCheckpointId: string, dataKey: DataKey): Promise<ShipBase> {
    return this.call(nodeRoutes.createBase, { body: { baseId, fromCheckpointId, dataKey } });
  }

  /**
   * Deletes the bases' local copies this node holds (at most `maxBasesPerDelete`). A node from
   * before 2026-12-06 does not serve that route: it is asked one base at a time, so control planes
   * may be upgraded before the nodes.
   */
  async deleteBases(baseIds: string[]): Promise<void> {
    try {
      await this.call(nodeRoutes.deleteBases, { body: { baseIds } });
    } catch (err) {
      if (!isSpaceError(err) || err.code !== ErrorCode.ROUTE_NOT_FOUND) throw err;
      for (const baseId of baseIds) await this.call(nodeRoutes.deleteBase, { params: { baseId } });
    }
  }

  /** Stores a checkpoint on the node in the object store as its difference to `base`, sealed with its tenant's `dataKey`. */
  async shipCheckpoint(checkpointId: string, base: ShipBase, dataKey: DataKey): Promise<StoredObject[]> {
    return (await this.call(nodeRoutes.shipCheckpoint, { params: { checkpointId }, body: { base, dataKey } })).objects;
  }

  /** Brings a checkpoint from the object store onto the node (its base first), opened with its tenant's `dataKey`. */
  fetchCheckpoint(checkpointId: string, base: ShipBase, objects: StoredObject[], dataKey: DataKey): Promise<unknown> {
    return this.call(nodeRoutes.fetchCheckpoint, { params: { checkpointId }, body: { base, objects, dataKey } });
  }

  deleteObjects(keys: string[]): Promise<unknown> {
    return this.call(nodeRoutes.deleteObjects, { body: { keys } });
  }

  /** Makes template version `templateId` from a checkpoint on the node. */
  createTemplate(templateId: string, checkpointId: string): Promise<unknown> {
    return this.call(nodeRoutes.createTemplate, { body: { templateId, checkpointId } });
  }

  /** Makes template version `templateId` from an image archive streamed to the node; the image's config comes back. */
  async importImage(templateId: string, archive: Readable, length: string | undefined): Promise<TemplateConfig> {
    const route = nodeRoutes.importImage;
    const headers: Record<string, string> = { 'content-type': 'application/x-tar', ...(length ? { 'content-length': length } : {}) };
    const reply = await this.upstream.send(route.method, routeUrl(route, { templateId }), archive, headers);
    return (await this.upstream.readJsonReply(reply, route.response, 1024 * 1024)).config;
  }

  /** Makes template version `templateId` from an image in a registry (`docker://…`), where the node can reach one. */
  async pullImage(templateId: string, image: string): Promise<TemplateConfig> {
    return (await this.call(nodeRoutes.pullImage, { params: { templateId }, body: { image } })).config;
  }

  deleteTemplate(templateId: string): Promise<unknown> {
    return this.call(nodeRoutes.deleteTemplate, { params: { templateId } });
  }

  configureEgress(sessionId: string, config: SessionEgressConfig): Promise<unknown> {
    return this.call(nodeRoutes.configureEgress, { params: { sessionId }, body: config });
  }

  egressAudit(sessionId: string, limit: number): Promise<RouteReply<typeof nodeRoutes.egressAudit>> {
    return this.call(nodeRoutes.egressAudit, { params: { sessionId }, query: { limit } });
  }

  /** Forwards a validated sandbox operation of the public API to the sandbox and relays the reply; an event stream resolves with its final event (null without one). */
  forward(route: HttpSandboxRoute, ctx: RequestContext, input: { body: unknown }, sandboxId: string): Promise<unknown> {
    return forwardRoute(route, ctx, input, this.upstream, this.sandboxPath(sandboxId, routePath(route, ctx.params)), this.headers);
  }

  /** Opens the sandbox's stream for a public WebSocket route (its path and query as the client asked). */
  socket(route: SandboxRoute, ctx: UpgradeContext, sandboxId: string): WebSocket {
    return this.upstream.socket(this.sandboxPath(sandboxId, routePath(route, ctx.params)) + ctx.url.search, this.headers);
  }

  private sandboxPath(sandboxId: string, opPath: string): string {
    return routeUrl({ path: nodeSandboxPrefix }, { sandboxId }) + opPath;
  }

  /** How many calls (of every placement's view) wait for the node's answer. */
  waitingCalls(): number {
    return this.upstream.waitingCalls;
  }

  /** How long calls have waited on the node without it answering any (`Upstream.silentMs`). */
  silentMs(now?: number): number {
    return this.upstream.silentMs(now);
  }

  /** How many connections to the node could not be opened since this client was made. */
  failedConnections(): number {
    return this.upstream.failedConnections;
  }

  /** Ends the calls waiting for the node's answer with NODE_UNAVAILABLE and `reason`; how many. */
  cutWaiting(reason: string): number {
    return this.upstream.cutWaiting(reason);
  }

  /** Closes the connections (of every placement's view too: they share them). */
  close(): void {
    this.upstream.close();
  }
}
