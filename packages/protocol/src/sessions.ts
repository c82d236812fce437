import { z } from 'zod';
import { EnvSchema, SandboxPathSchema } from './common.js';
import { CommandSchema } from './exec.js';
import { PreviewPortSchema } from './ports.js';
import { EgressPolicySchema, SecretGrantSchema, SecretGrantsSchema } from './egress.js';
import { VolumeMountListSchema, VolumeMountSchema } from './volumes.js';

export const TemplateNameSchema = z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'template names are lowercase letters, digits and dashes');

/**
 * Other names of built-in templates: E2B's code interpreter template is SPACE's `code-interpreter`.
 * A Map, not an object: a name a client sends, such as `constructor`, must not find Object's own properties.
 */
export const builtinTemplateAliases: ReadonlyMap<string, string> = new Map([['code-interpreter-v1', 'code-interpreter']]);

export const ResourcesSchema = z
  .object({
    /** Memory limit of the sandbox, MiB. */
    memoryMb: z
      .number()
      .int()
      .min(64)
      .max(64 * 1024)
      .default(1024),
    /** CPU quota in cores (fractions allowed). */
    cpus: z.number().min(0.1).max(64).default(1),
    /** Most host tasks (processes and threads) the sandbox may hold. */
    pids: z.number().int().min(32).max(65536).default(1024),
    /**
     * Disk the session may write to its volume, GB (its template's files not counted): past it writes fail with
     * "Disk quota exceeded". Unset: the platform's default (`SPACE_SESSION_DISK_GB`).
     */
    diskGb: z
      .number()
      .min(0.1)
      .max(16 * 1024)
      .optional(),
  })
  .strict();
export type Resources = z.infer<typeof ResourcesSchema>;

export const MetadataSchema = z.record(z.string().max(128), z.string().max(1024)).refine((m) => Object.keys(m).length <= 64, 'at most 64 metadata entries');

/**
 * What a resume brings back when the session's newest checkpoint is a full one and its files changed
 * since: `processes` restores that checkpoint (processes continue; files written after it are kept
 * in an fs checkpoint taken first, not in the volume), `files` boots on the newest files (the
 * processes of the checkpoint are not restored). Either way the session's history says which.
 */
export const OnResumeSchema = z.enum(['processes', 'files']);
export type OnResume = z.infer<typeof OnResumeSchema>;

/**
 * A service of a session: a command started in every new sandbox of the session that did not
 * restore its processes from memory, restarted with a growing pause (1 s doubling to 30 s) when it
 * exits. `port`: where it serves; a preview request to that port waits up to 30 s for it to listen.
 */
export const ServiceNameSchema = z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'service names are lowercase letters, digits and dashes');
export const ServiceSpecSchema = z
  .object({
    cmd: CommandSchema,
    port: PreviewPortSchema.optional(),
    cwd: SandboxPathSchema.optional(),
    env: EnvSchema.optional(),
  })
  .strict();
export const ServiceSchema = ServiceSpecSchema.extend({ name: ServiceNameSchema }).strict();
export type Service = z.infer<typeof ServiceSchema>;

/** What happens to a session when its timeout passes: deleted, or paused (checkpointed, sandbox stopped; the next call resumes it). */
export const OnTimeoutSchema = z.enum(['delete', 'pause']);
export type OnTimeout = z.infer<typeof OnTimeoutSchema>;

/** Longest session timeout: 30 days. */
const maxTimeoutSec = 30 * 24 * 3600;

export const CreateSessionRequestSchema = z
  .object({
    /** A built-in (`base`, `tiny`, `code-interpreter`, alias `code-interpreter-v1`) or one of the tenant's templates. */
    template: TemplateNameSchema.default('base').transform((name) => builtinTemplateAliases.get(name) ?? name),
    env: EnvSchema.default({}),
    resources: ResourcesSchema.default({}),
    metadata: MetadataSchema.default({}),
    /**
     * Secrets of the tenant the sandbox may use: each name becomes an env var holding its
     * placeholder; `{name, secret}` puts the secret `secret` under env var `name`.
     */
    secrets: SecretGrantsSchema.default([]),
    /** What the sandbox may reach outside; changeable later with PUT /v1/sessions/:id/egress. */
    egress: EgressPolicySchema.default({}),
    /** Seconds between automatic filesystem checkpoints while a sandbox runs; 0 turns them off. */
    checkpointIntervalSec: z
      .number()
      .int()
      .min(0)
      .max(7 * 24 * 3600)
      .default(60),
    /**
     * Seconds between automatic full (memory) checkpoints while processes run in the sandbox (none
     * is taken while none runs); 0 turns them off. As often as fs ones by default: a full checkpoint
     * pauses the sandbox briefly and never stops it, and a resume brings back processes from at most
     * about a minute ago. While the volume is written they come sooner, as often as their measured
     * pause allows within the platform's share (`SPACE_FULL_CHECKPOINT_PAUSE_PERCENT`, 2%), never
     * more than every 10 s.
     */
    fullCheckpointIntervalSec: z
      .number()
      .int()
      .min(0)
      .max(7 * 24 * 3600)
      .default(60),
    /** Seconds without calls after which an idle sandbox is checkpointed and stopped; 0 never. */
    idleTimeoutSec: z
      .number()
      .int()
      .min(0)
      .max(30 * 24 * 3600)
      .default(900),
    onResume: OnResumeSchema.default('processes'),
    /**
     * Milliseconds after a code cell ends (POST /code/run) with no other call meanwhile, after which a
     * full checkpoint holds the session's kernels, so a sandbox that dies afterwards resumes with their
     * variables; 0 turns these checkpoints off (the periodic ones still come).
     */
    codeCheckpointDelayMs: z.number().int().min(0).max(3_600_000).default(1000),
    /** Seconds from now after which the session is deleted or paused (`onTimeout`); unset: it lives until deleted. */
    timeoutSec: z.number().int().min(1).max(maxTimeoutSec).optional(),
    onTimeout: OnTimeoutSchema.default('delete'),
    services: z
      .array(ServiceSchema)
      .max(16)
      .default([])
      .refine((list) => new Set(list.map((s) => s.name)).size === list.length, 'service names must not repeat'),
    /** The tenant's volumes to mount (POST /v1/volumes first); the session runs on their node. */
    volumes: VolumeMountListSchema,
    /** Ports anyone may reach through preview URLs, without a key or token (PUT/DELETE /v1/sessions/:id/public-ports/:port later). */
    publicPorts: z
      .array(PreviewPortSchema)
      .max(16)
      .default([])
      .refine((ports) => new Set(ports).size === ports.length, 'public ports must not repeat'),
  })
  .strict();
export type CreateSessionRequest = z.infer<typeof CreateSessionRequestSchema>;

export const SessionStatusSchema = z.enum(['starting', 'running', 'idle', 'stopped', 'failed']);
export type SessionStatus = z.infer<typeof SessionStatusSchema>;

export const SandboxRefSchema = z.object({ id: z.string(), nodeId: z.string(), startedAt: z.string() }).strict();

export const SessionSchema = z
  .object({
    id: z.string(),
    tenantId: z.string(),
    template: z.string(),
    status: SessionStatusSchema,
    createdAt: z.string(),
    env: z.record(z.string()),
    resources: ResourcesSchema,
    metadata: z.record(z.string()),
    secrets: z.array(SecretGrantSchema),
    egress: EgressPolicySchema,
    checkpointIntervalSec: z.number().int(),
    fullCheckpointIntervalSec: z.number().int(),
    idleTimeoutSec: z.number().int(),
    onResume: OnResumeSchema,
    codeCheckpointDelayMs: z.number().int(),
    /** When the session is deleted or paused (`onTimeout`); null: never. */
    expiresAt: z.string().nullable(),
    onTimeout: OnTimeoutSchema,
    services: z.array(ServiceSchema),
    volumes: z.array(VolumeMountSchema.required()),
    publicPorts: z.array(z.number().int()),
    /** Where exec, PTYs and E2B commands run without a cwd: its template's WORKDIR, else /workspace. */
    cwd: z.string(),
    sandbox: SandboxRefSchema.nullable(),
    /** The node that holds the session's volume (and runs its sandbox). */
    nodeId: z.string().nullable(),
    /** The checkpoint this session was forked from. */
    parentCheckpointId: z.string().nullable(),
    /** When its newest checkpoint was taken; null: none. */
    lastCheckpointAt: z.string().nullable(),
    /** Every sandbox that has served the session (only on GET /v1/sessions/:id). */
    sandboxHistory: z
      .array(
        z
          .object({
            id: z.string(),
            nodeId: z.string(),
            startedAt: z.string(),
            endedAt: z.string().nullable(),
            endReason: z.string().nullable(),
            /** The full checkpoint whose memory this sandbox was restored from (its processes continued). */
            restoredFrom: z.string().nullable(),
            /** How the start went where it was not a plain boot: which checkpoint holds newer files, a memory image not restored and why. */
            note: z.string().nullable(),
          })
          .strict(),
      )
      .optional(),
    /** The session's checkpoints, oldest first (only on GET /v1/sessions/:id). */
    checkpoints: z.array(z.object({ id: z.string(), kind: z.string(), createdAt: z.string() }).strict()).optional(),
  })
  .strict();
export type Session = z.infer<typeof SessionSchema>;

export const SessionListSchema = z.object({ sessions: z.array(SessionSchema) }).strict();

/**
 * What `GET /v1/events` streams to a tenant (server-sent events, `event:` the type, `data:` this
 * JSON): its sessions appearing, changing status or sandbox, and going; its checkpoints taken and
 * deleted. A session made from a checkpoint (a fork) says so in `parentCheckpointId`.
 */
export const TenantEventSchema = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('session.created'),
      sessionId: z.string(),
      status: SessionStatusSchema,
      template: z.string(),
      parentCheckpointId: z.string().nullable(),
    })
    .strict(),
  z.object({ type: z.literal('session.status'), sessionId: z.string(), status: SessionStatusSchema, sandboxId: z.string().nullable() }).strict(),
  z.object({ type: z.literal('session.deleted'), sessionId: z.string() }).strict(),
  z.object({ type: z.literal('checkpoint.created'), sessionId: z.string(), checkpointId: z.string(), kind: z.string() }).strict(),
  z.object({ type: z.literal('checkpoint.deleted'), sessionId: z.string(), checkpointId: z.string() }).strict(),
]);
export type TenantEvent = z.infer<typeof TenantEventSchema>;

/** A new timeout, counted from now; 0 removes it (the session lives until deleted). */
export const SetTimeoutRequestSchema = z.object({ timeoutSec: z.number().int().min(0).max(maxTimeoutSec), onTimeout: OnTimeoutSchema.optional() }).strict();
export type SetTimeoutRequest = z.infer<typeof SetTimeoutRequestSchema>;

/**
 * A token that acts on one session only: its sandbox operations (exec, processes, files, streams)
 * and reading the session. Handed to code that should drive a sandbox without the tenant's key
 * (the E2B data plane's access token); deleted with the session.
 */
export const SessionTokenSchema = z.object({ sessionId: z.string(), token: z.string() }).strict();
export type SessionToken = z.infer<typeof SessionTokenSchema>;
