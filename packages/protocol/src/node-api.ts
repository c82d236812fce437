import { NodeCapacitySchema } from './nodes.js';
import { z } from 'zod';
import { AbsoluteSandboxPathSchema, EnvSchema } from './common.js';
import { SessionEgressConfigSchema } from './egress.js';
import { ResourcesSchema, ServiceSchema, TemplateNameSchema } from './sessions.js';
import { TemplateIdSchema } from './templates.js';
import { NodeVolumeMountSchema } from './volumes.js';

/** Control plane -> node agent: start a sandbox serving a session's volume (created from the template if new). */
export const StartSandboxRequestSchema = z
  .object({
    sessionId: z.string().regex(/^ses_[A-Za-z0-9]{6,40}$/),
    /** The session's tenant, which the node's usage measurements name. */
    tenantId: z.string().min(1).max(64).optional(),
    /** A built-in template's name, or the id of a tenant's template version. */
    template: z.union([TemplateNameSchema, TemplateIdSchema]),
    env: EnvSchema,
    resources: ResourcesSchema,
    egress: SessionEgressConfigSchema,
    /** Started in the sandbox unless it restored the session's processes from memory. */
    services: z.array(ServiceSchema).max(16).default([]),
    /** The tenant's volumes bound into the sandbox (a new session that mounts any boots: pooled sandboxes cannot gain mounts). */
    mounts: z.array(NodeVolumeMountSchema).max(16).default([]),
    /** Where processes started without a cwd run (the template's WORKDIR); unset: the workspace. */
    cwd: AbsoluteSandboxPathSchema.optional(),
  })
  .strict();
export type StartSandboxRequest = z.infer<typeof StartSandboxRequestSchema>;

/** Node agent -> control plane: whether a service was running (and is stopped now). */
export const ServiceStoppedSchema = z.object({ stopped: z.boolean() }).strict();

export const SandboxInfoSchema = z
  .object({
    sandboxId: z.string(),
    sessionId: z.string(),
    nodeId: z.string(),
    template: z.string(),
    startedAt: z.string(),
    running: z.boolean(),
    /** The full checkpoint whose memory image the sandbox was restored from (its processes continued), or null for a fresh boot. */
    restoredFrom: z.string().nullable(),
    /** What the start could not do as asked, e.g. a memory image it did not restore and why. */
    note: z.string().max(2000).nullable(),
    /**
     * The fs checkpoint since which nothing could have written the session's volume: when it was
     * taken no process ran in the sandbox but its init and daemon, and no call or stream has come in
     * since (reads aside). Null when anything may have; absent from nodes that do not track it.
     */
    quietSince: z.string().nullable().optional(),
  })
  .strict();
export type SandboxInfo = z.infer<typeof SandboxInfoSchema>;

/**
 * What a running sandbox uses, as the host sees it (its cgroup: the gVisor Sentry's memory is
 * counted, as it is the sandbox's), and its volume's disk (btrfs quota group).
 */
export const SandboxMetricsSchema = z
  .object({
    sampledAt: z.string(),
    /** The sandbox's CPU quota, in CPUs. */
    cpuCount: z.number().nonnegative(),
    /** CPU used over a short window (0.2 s) before `sampledAt`, as a percentage of `cpuCount`. */
    cpuUsedPct: z.number().nonnegative(),
    memoryBytes: z.number().int().nonnegative(),
    memoryLimitBytes: z.number().int().nonnegative().nullable(),
    /** Bytes the session wrote to its volume (simple quotas: its template's files not counted); null where quotas are off. */
    diskBytes: z.number().int().nonnegative().nullable(),
    diskLimitBytes: z.number().int().nonnegative().nullable(),
  })
  .strict();
export type SandboxMetrics = z.infer<typeof SandboxMetricsSchema>;

/** Node agent -> control plane: the sandboxes serving sessions on the node. */
export const SandboxInfoListSchema = z.object({ sandboxes: z.array(SandboxInfoSchema).max(100_000) }).strict();

export const NodeHealthSchema = z
  .object({
    nodeId: z.string(),
    templates: z.array(z.string()),
    sandboxes: z.number().int().nonnegative(),
    /** Ready sandboxes in the warm pool, per template. */
    pool: z.record(z.number().int().nonnegative()),
    /** Templates with a memory image for snapshot preloading (used when their pool is empty). */
    templateImages: z.array(z.string()).default([]),
    /** Sandboxes started for sessions since the node agent started, by how: pool, template-image, checkpoint (memory), boot. */
    starts: z.record(z.number().int().nonnegative()).default({}),
    /** Sessions with a running sandbox whose gateway settings this node does not hold (after its restart). */
    egressUnconfigured: z.array(z.string()),
    /** Usage batches no control plane acknowledged yet (`GET /node/v1/usage` hands them over). */
    usageBatches: z.number().int().nonnegative().default(0),
    /** What the node offers (`SPACE_NODE_MEMORY_MB`, `SPACE_NODE_CPUS`; the host's by default). */
    capacity: NodeCapacitySchema,
    /** Requests its egress gateway answered since it started, by decision (allowed, denied, failed). */
    gatewayRequests: z.record(z.number().int().nonnegative()).default({}),
    /**
     * Its storage: `low` while its btrfs image's host filesystem has less free than its reserve (new
     * sessions and full checkpoints refused), `read-only` once btrfs turned so; the host's free bytes
     * (null: a block device of its own).
     */
    storage: z
      .object({ status: z.enum(['ok', 'low', 'read-only']), hostFreeBytes: z.number().int().nonnegative().nullable() })
      .strict()
      .default({ status: 'ok', hostFreeBytes: null }),
  })
  .strict();
export type NodeHealth = z.infer<typeof NodeHealthSchema>;
