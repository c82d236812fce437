import { Readable } from 'node:stream';
import { resolveOptions, type CallOptions, type SpaceOptions } from './options.js';
import { Session, SessionHandle } from './session.js';
import { CheckpointFiles } from './checkpoint-files.js';
import { Transport } from './transport.js';
import type {
  CheckpointDiffData,
  CreateSessionOptions,
  FileDiffData,
  DrainResultData,
  NodeData,
  JoinTokenData,
  SecretData,
  SecretGrant,
  SessionData,
  TemplateData,
  TemplateBuildData,
  TemplateBuildOptions,
  TenantEventData,
  TenantLimitsData,
  UsageOptions,
  UsageReportData,
  VolumeData,
  VolumeSnapshotData,
} from './types.js';

/**
 * The SPACE client: `new Space({ apiUrl, apiKey })`, both defaulting to `SPACE_API_URL` and
 * `SPACE_API_KEY`.
 */
export class Space {
  readonly sessions: {
    create(options?: CreateSessionOptions & CallOptions): Promise<Session>;
    list(options?: CallOptions): Promise<Session[]>;
    get(id: string, options?: CallOptions): Promise<Session>;
    /** A handle on a session by id, made without a call: for operations that need only the id. */
    handle(id: string): SessionHandle;
  };
  readonly checkpoints: {
    /** `count` sessions from the checkpoint, with its session's secrets or `secrets` instead (fewer, or others under the same names). */
    fork(checkpointId: string, options?: { count?: number; secrets?: SecretGrant[] } & CallOptions): Promise<Session[]>;
    /** A checkpoint's files as they were, read without a sandbox: `await space.checkpoints.files(id).read('app/config.yaml')`. */
    files(checkpointId: string): CheckpointFiles;
    /**
     * One page of what differs from checkpoint `from` to `to` (one lineage), by path: pass `next` as
     * `after` for the next. `to` may be `'live'`: the session's files now, checkpointed first; the
     * answer's `to` names that checkpoint, for the next pages.
     */
    diff(from: string, to: string, options?: { after?: string; limit?: number } & CallOptions): Promise<CheckpointDiffData>;
    /** One file in checkpoints `from` and `to` (or `'live'`): sizes, sha256, and a unified diff of text (`unified`). */
    diffFile(from: string, to: string, path: string, options?: CallOptions): Promise<FileDiffData>;
  };

  /**
   * The tenant's secrets. A value goes only to its `hosts`, injected by the node's gateway in place
   * of the placeholder a sandbox sees; setting an existing one rotates it (no sandbox restart).
   */
  readonly secrets: {
    set(name: string, secret: { value: string; hosts: string[] } & CallOptions): Promise<SecretData>;
    list(options?: CallOptions): Promise<SecretData[]>;
    delete(name: string, options?: CallOptions): Promise<void>;
  };

  /**
   * Templates: `create` makes one of the tenant's from a session (an fs checkpoint of it is taken
   * first) or a checkpoint, a name made again being a new version; new sessions name it in `template`.
   */
  readonly templates: {
    create(template: { name: string; fromSession?: string; fromCheckpoint?: string } & CallOptions): Promise<TemplateData>;
    /** Starts a Dockerfile build (it runs in the background); `buildLog` follows it, `build` reads its status. */
    build(options: TemplateBuildOptions & CallOptions): Promise<TemplateBuildData>;
    getBuild(name: string, buildId: string, options?: CallOptions): Promise<TemplateBuildData>;
    /** Imports an image: a `docker save` archive or an OCI layout tar (streamed), or `{image: "docker://…"}` pulled where the node reaches a registry. */
    import(name: string, source: { archive: Readable | Uint8Array } | { image: string }, options?: CallOptions): Promise<TemplateData>;
    /** The build's log as it grows (`follow`, the default: until the build ends), chunk by chunk. */
    buildLog(name: string, buildId: string, options?: { follow?: boolean; signal?: AbortSignal }): AsyncIterable<string>;
    list(options?: CallOptions): Promise<TemplateData[]>;
    /** Refused (TEMPLATE_IN_USE) while sessions made from it exist, unless `force`: they keep their files. */
    delete(name: string, options?: { force?: boolean } & CallOptions): Promise<void>;
  };

  /**
   * Volumes: directories with a size of their own that outlive sessions. Sessions mount them at
   * create (`volumes: [{ name, path, readOnly }]`); one session at a time read-write, any number
   * read-only. Snapshots are read-only copies new volumes can start from (`fromSnapshot`).
   */
  readonly volumes: {
    create(volume: { name: string; sizeGb?: number; fromSnapshot?: string } & CallOptions): Promise<VolumeData>;
    list(options?: CallOptions): Promise<VolumeData[]>;
    get(name: string, options?: CallOptions): Promise<VolumeData>;
    /** Refused (VOLUME_IN_USE) while sessions mount it; its snapshots go with it. */
    delete(name: string, options?: CallOptions): Promise<void>;
    snapshot(name: string, options?: CallOptions): Promise<VolumeSnapshotData>;
    snapshots(name: string, options?: CallOptions): Promise<VolumeSnapshotData[]>;
    deleteSnapshot(name: string, snapshotId: string, options?: CallOptions): Promise<void>;
  };

  /**
   * The tenant's events as they happen, from any control plane (within about a second):
   * `for await (const event of space.events({ signal }))`; ends when `signal` aborts.
   */
  readonly events: (options?: { signal?: AbortSignal }) => AsyncIterable<TenantEventData>;

  /** The tenant's limits and what it uses of each. */
  readonly limits: (options?: CallOptions) => Promise<TenantLimitsData>;

  /** What the tenant (admin key: every tenant, or `tenant`) used over a period, by tenant, session or day. */
  readonly usage: (options?: UsageOptions & CallOptions) => Promise<UsageReportData>;

  /** The cluster's nodes (admin key). `drain` moves every session of a node to the others through the object store. */
  readonly nodes: {
    list(options?: CallOptions): Promise<NodeData[]>;
    drain(nodeId: string, options?: CallOptions): Promise<DrainResultData>;
    undrain(nodeId: string, options?: CallOptions): Promise<NodeData>;
    /** A token for new nodes (`SPACE_NODE_JOIN_TOKEN`), usable for `ttlSec` (an hour by default) by `uses` nodes (one by default). */
    joinToken(options?: CallOptions & { ttlSec?: number; uses?: number }): Promise<JoinTokenData>;
    /** Revokes a node's credential: its heartbeats are refused and its sessions move on once it is found lost. */
    revokeCredential(nodeId: string, options?: CallOptions): Promise<{ nodeId: string; revoked: boolean }>;
  };

  constructor(options: SpaceOptions = {}) {
    const t = new Transport(resolveOptions(options, process.env));
    this.limits = (opts = {}) => t.json<TenantLimitsData>('GET', '/v1/limits', opts);
    this.usage = ({ from, to, groupBy, sessionId, tenant, ...call } = {}) => {
      const iso = (at: string | Date | undefined) => (at instanceof Date ? at.toISOString() : at);
      const query = Object.entries({ from: iso(from), to: iso(to), groupBy, sessionId, tenant }).filter((e): e is [string, string] => e[1] !== undefined);
      return t.json<UsageReportData>('GET', `/v1/usage${query.length ? `?${new URLSearchParams(query)}` : ''}`, call);
    };
    this.events = async function* (opts = {}) {
      const res = await t.request('GET', '/v1/events', { signal: opts.signal, timeoutMs: 2 ** 31 - 1 });
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
            const data = /^data: (.*)$/m.exec(buffer.slice(0, end))?.[1];
            buffer = buffer.slice(end + 2);
            if (data) yield JSON.parse(data) as TenantEventData;
          }
        }
      } catch (err) {
        if (!opts.signal?.aborted) throw err;
      }
    };
    this.nodes = {
      async list(opts = {}) {
        return (await t.json<{ nodes: NodeData[] }>('GET', '/v1/nodes', opts)).nodes;
      },
      drain: (nodeId, opts = {}) => t.json<DrainResultData>('POST', `/v1/nodes/${encodeURIComponent(nodeId)}/drain`, { timeoutMs: 3_600_000, ...opts }),
      undrain: (nodeId, opts = {}) => t.json<NodeData>('POST', `/v1/nodes/${encodeURIComponent(nodeId)}/undrain`, opts),
      joinToken: ({ ttlSec, uses, ...opts } = {}) => t.json<JoinTokenData>('POST', '/v1/nodes/join-tokens', { ...opts, json: { ttlSec, uses } }),
      revokeCredential: (nodeId, opts = {}) =>
        t.json<{ nodeId: string; revoked: boolean }>('DELETE', `/v1/nodes/${encodeURIComponent(nodeId)}/credential`, opts),
    };
    const buildPath = (name: string, id: string) => `/v1/templates/${encodeURIComponent(name)}/builds/${encodeURIComponent(id)}`;
    this.templates = {
      async create(opts) {
        const { name, fromSession, fromCheckpoint, ...call } = opts;
        return t.json<TemplateData>('POST', '/v1/templates', { ...call, json: { name, fromSession, fromCheckpoint } });
      },
      build(opts) {
        const { signal, timeoutMs, files, ...build } = opts;
        const encoded = Object.fromEntries(Object.entries(files ?? {}).map(([p, data]) => [p, Buffer.from(data).toString('base64')]));
        return t.json<TemplateBuildData>('POST', '/v1/templates', { signal, timeoutMs, json: { ...build, files: encoded } });
      },
      getBuild: (name, id, opts = {}) => t.json<TemplateBuildData>('GET', buildPath(name, id), opts),
      async import(name, source, opts = {}) {
        const path = `/v1/templates/${encodeURIComponent(name)}/image`;
        if ('image' in source) return t.json<TemplateData>('POST', path, { timeoutMs: 3_600_000, ...opts, json: source });
        const body =
          source.archive instanceof Readable
            ? (Readable.toWeb(source.archive) as unknown as ReadableStream<Uint8Array>)
            : new Blob([new Uint8Array(source.archive)]);
        const res = await t.request('POST', path, { timeoutMs: 3_600_000, ...opts, body, headers: { 'content-type': 'application/x-tar' } });
        return (await res.json()) as TemplateData;
      },
      async *buildLog(name, id, opts = {}) {
        const follow = opts.follow ?? true;
        // A build may run for an hour or more: the log's request is not cut by a call timeout.
        const res = await t.request('GET', `${buildPath(name, id)}/logs${follow ? '?follow=1' : ''}`, { signal: opts.signal, timeoutMs: 2 ** 31 - 1 });
        const decoder = new TextDecoder();
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) yield decoder.decode(chunk, { stream: true });
      },
      async list(opts = {}) {
        return (await t.json<{ templates: TemplateData[] }>('GET', '/v1/templates', opts)).templates;
      },
      async delete(name, opts = {}) {
        const { force, ...call } = opts;
        await t.json('DELETE', `/v1/templates/${encodeURIComponent(name)}${force ? '?force=1' : ''}`, call);
      },
    };
    const volumePath = (name: string) => `/v1/volumes/${encodeURIComponent(name)}`;
    this.volumes = {
      create(opts) {
        const { name, sizeGb, fromSnapshot, signal, timeoutMs } = opts;
        return t.json<VolumeData>('POST', '/v1/volumes', { signal, timeoutMs, json: { name, sizeGb, fromSnapshot } });
      },
      async list(opts = {}) {
        return (await t.json<{ volumes: VolumeData[] }>('GET', '/v1/volumes', opts)).volumes;
      },
      get: (name, opts = {}) => t.json<VolumeData>('GET', volumePath(name), opts),
      async delete(name, opts = {}) {
        await t.json('DELETE', volumePath(name), opts);
      },
      snapshot: (name, opts = {}) => t.json<VolumeSnapshotData>('POST', `${volumePath(name)}/snapshots`, opts),
      async snapshots(name, opts = {}) {
        return (await t.json<{ snapshots: VolumeSnapshotData[] }>('GET', `${volumePath(name)}/snapshots`, opts)).snapshots;
      },
      async deleteSnapshot(name, snapshotId, opts = {}) {
        await t.json('DELETE', `${volumePath(name)}/snapshots/${encodeURIComponent(snapshotId)}`, opts);
      },
    };
    this.sessions = {
      async create(opts = {}) {
        const { signal, timeoutMs, ...body } = opts;
        return new Session(t, await t.json<SessionData>('POST', '/v1/sessions', { signal, timeoutMs, json: body }));
      },
      async list(opts = {}) {
        return (await t.json<{ sessions: SessionData[] }>('GET', '/v1/sessions', opts)).sessions.map((d) => new Session(t, d));
      },
      async get(id, opts = {}) {
        return new Session(t, await t.json<SessionData>('GET', `/v1/sessions/${encodeURIComponent(id)}`, opts));
      },
      handle(id) {
        return new SessionHandle(t, id);
      },
    };
    this.secrets = {
      async set(name, opts) {
        const { value, hosts, ...call } = opts;
        return t.json<SecretData>('PUT', `/v1/secrets/${encodeURIComponent(name)}`, { ...call, json: { value, hosts } });
      },
      async list(opts = {}) {
        return (await t.json<{ secrets: SecretData[] }>('GET', '/v1/secrets', opts)).secrets;
      },
      async delete(name, opts = {}) {
        await t.json('DELETE', `/v1/secrets/${encodeURIComponent(name)}`, opts);
      },
    };
    this.checkpoints = {
      async fork(checkpointId, opts = {}) {
        const { count, secrets, ...call } = opts;
        const reply = await t.json<{ sessions: SessionData[] }>('POST', `/v1/checkpoints/${encodeURIComponent(checkpointId)}/fork`, {
          ...call,
          json: { count: count ?? 1, ...(secrets ? { secrets } : {}) },
        });
        return reply.sessions.map((d) => new Session(t, d));
      },
      files: (checkpointId) => new CheckpointFiles(t, checkpointId),
      async diff(from, to, opts = {}) {
        const { after, limit, ...call } = opts;
        const query = new URLSearchParams({ to, ...(after === undefined ? {} : { after }), ...(limit === undefined ? {} : { limit: String(limit) }) });
        return t.json<CheckpointDiffData>('GET', `/v1/checkpoints/${encodeURIComponent(from)}/diff?${query}`, call);
      },
      async diffFile(from, to, path, opts = {}) {
        return t.json<FileDiffData>('GET', `/v1/checkpoints/${encodeURIComponent(from)}/diff/file?${new URLSearchParams({ to, path })}`, opts);
      },
    };
  }
}
