import { z } from 'zod';

/** A node's id as node agents make them (`node_…`) or as an operator names one. */
/**
 * The name (subject CN) on a control plane's client certificate of the cluster CA: a node API takes
 * clients with it only (a node's own certificate names its node id, which cannot contain a space).
 */
export const CONTROL_PLANE_CERTIFICATE_NAME = 'SPACE control plane';

export const NodeIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'a node id is 1-64 letters, digits, "_", "." or "-"');

/** What a node offers; placement compares the sessions a node serves with it. */
export const NodeCapacitySchema = z.object({ memoryMb: z.number().int().positive(), cpus: z.number().positive() }).strict();
export type NodeCapacity = z.infer<typeof NodeCapacitySchema>;

const beatSessionId = z.string().regex(/^ses_[a-z0-9]{1,40}$/, 'a session id');

/**
 * Node agent -> control plane (its node credential), every few seconds: registers the node on the first one,
 * and says it is alive. `url` and `token` are how control planes reach its node API.
 */
export const NodeHeartbeatSchema = z
  .object({
    id: NodeIdSchema,
    url: z
      .string()
      .max(2048)
      .url()
      .refine((u) => /^https?:\/\//.test(u), 'the node URL must be http:// or https://'),
    token: z.string().min(16).max(256),
    capacity: NodeCapacitySchema,
    sandboxes: z.number().int().nonnegative(),
    /** After how long without an acknowledged heartbeat the node fences itself (`SPACE_NODE_FENCE_AFTER_SEC`): a control plane refuses a node that would fence too late. */
    fenceAfterMs: z.number().int().positive().optional(),
    /**
     * The sessions whose sandboxes the node runs, sent when it joins (its first heartbeat, and the
     * first after heartbeats failed): the reply names those it must stop.
     */
    sessions: z.array(beatSessionId).max(10_000).optional(),
    /**
     * Sent while not empty: sessions with a running sandbox whose egress settings the node's gateway
     * lacks (its agent restarted under them). The control plane that takes the beat sends them again.
     */
    egressUnconfigured: z.array(beatSessionId).max(10_000).optional(),
    /** Sent while not 0: usage batches the node holds that no control plane acknowledged. The control plane that takes the beat collects them. */
    usageBatches: z.number().int().nonnegative().optional(),
    /**
     * Sent when it joins while fenced: since when (the node's clock) its sandboxes have been paused.
     * A session that moved away meanwhile records its copy here ended then, not when it was found lost.
     */
    fencedSince: z.string().datetime().optional(),
    /** Sent while not `ok`: its host disk below its reserve (`low`) or its btrfs read-only; placement passes it by. */
    storage: z.enum(['low', 'read-only']).optional(),
  })
  .strict();
export type NodeHeartbeat = z.infer<typeof NodeHeartbeatSchema>;

/**
 * The answer to a heartbeat. `stop`: of the sessions it sent, those the node must not run, since
 * they moved to another node while it was away (or were deleted): fencing before it serves again.
 */
export const NodeHeartbeatReplySchema = z.object({ ok: z.literal(true), stop: z.array(z.string()) }).strict();
export type NodeHeartbeatReply = z.infer<typeof NodeHeartbeatReplySchema>;

/** `lost`: no heartbeat for `SPACE_NODE_LOST_AFTER_SEC`; `draining`: takes no new sessions. */
export const NodeStatusSchema = z.enum(['ready', 'draining', 'lost']);
export type NodeStatus = z.infer<typeof NodeStatusSchema>;

export const NodeViewSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    status: NodeStatusSchema,
    /** Sessions whose volume is on the node. */
    sessions: z.number().int().nonnegative(),
    /** Sandboxes running there at its last heartbeat. */
    sandboxes: z.number().int().nonnegative(),
    capacity: NodeCapacitySchema,
    /** Its storage at its last heartbeat: `low` (host disk below its reserve) and `read-only` nodes get no new sessions. */
    storage: z.enum(['ok', 'low', 'read-only']),
    registeredAt: z.string(),
    lastHeartbeatAt: z.string(),
  })
  .strict();
export type NodeView = z.infer<typeof NodeViewSchema>;
export const NodeListSchema = z.object({ nodes: z.array(NodeViewSchema) }).strict();

/** What draining a node did: each of its sessions moved (to which node, and what its history tells) or not (and why). */
export const DrainResultSchema = z
  .object({
    nodeId: z.string(),
    moved: z.array(z.object({ sessionId: z.string(), to: z.string(), note: z.string() }).strict()),
    failed: z.array(z.object({ sessionId: z.string(), code: z.string(), message: z.string() }).strict()),
  })
  .strict();
export type DrainResult = z.infer<typeof DrainResultSchema>;

/** One sample of the control plane's aggregate numbers (`/metrics`), for the console's charts. */
export const MetricsSampleSchema = z.object({ at: z.string(), values: z.record(z.string(), z.number()) }).strict();
export const MetricsHistorySchema = z.object({ samples: z.array(MetricsSampleSchema) }).strict();

/**
 * How long a join token stays usable when none is asked for (an hour), and the longest (90 days: a
 * Kubernetes DaemonSet's token, shared by the sandbox hosts added over time, is renewed in its Secret).
 */
export const defaultJoinTokenTtlSec = 3600;
export const maxJoinTokenTtlSec = 90 * 86_400;
/** How many nodes one join token may let in (1 unless asked: a DaemonSet's pods share one). */
export const maxJoinTokenUses = 1000;

/** Admin -> control plane: a token for new nodes to join with (`space node join-token`), once unless `uses` says more. */
export const CreateJoinTokenRequestSchema = z
  .object({ ttlSec: z.number().int().min(60).max(maxJoinTokenTtlSec).optional(), uses: z.number().int().min(1).max(maxJoinTokenUses).optional() })
  .strict();
export type CreateJoinTokenRequest = z.infer<typeof CreateJoinTokenRequestSchema>;
export const JoinTokenSchema = z.object({ token: z.string(), expiresAt: z.string(), uses: z.number().int() }).strict();
export type JoinToken = z.infer<typeof JoinTokenSchema>;

/** A name the control planes reach a node by, for its certificate: a host name or an IP address. */
const NodeHostSchema = z
  .string()
  .max(253)
  .regex(/^([A-Za-z0-9-]{1,63}\.)*[A-Za-z0-9-]{1,63}$|^[0-9.]{7,15}$|^[0-9A-Fa-f:]{2,39}$/, 'a host name or an IP address');

const CertificateRequestSchema = z
  .string()
  .max(8192)
  .regex(/^-----BEGIN CERTIFICATE REQUEST-----/, 'a PEM certificate request');
const NodeHostsSchema = z.array(NodeHostSchema).min(1).max(8);

/**
 * Node agent -> control plane, once: trades a join token for the node's own credential and, with
 * `csr` (a certificate request for the key it keeps), a certificate for its node API naming `hosts`.
 */
export const NodeJoinRequestSchema = z
  .object({
    nodeId: NodeIdSchema,
    joinToken: z.string().min(1).max(256),
    csr: CertificateRequestSchema.optional(),
    hosts: NodeHostsSchema.optional(),
  })
  .strict();
export type NodeJoinRequest = z.infer<typeof NodeJoinRequestSchema>;
/**
 * The node's credential (shown once): it heartbeats with it, and it reaches nothing but the node
 * routes. With a cluster CA (`SPACE_CLUSTER_CA_DIR`), the node API's certificate and the CA's.
 */
export const NodeJoinReplySchema = z
  .object({ nodeId: NodeIdSchema, credential: z.string(), certificate: z.string().optional(), caCertificate: z.string().optional() })
  .strict();
export type NodeJoinReply = z.infer<typeof NodeJoinReplySchema>;
/**
 * Node agent -> control plane, with its own credential, before its node API's certificate expires:
 * a new certificate for a new key (`csr`), naming `hosts`; the node serves it from then on.
 */
export const NodeCertificateRequestSchema = z.object({ nodeId: NodeIdSchema, csr: CertificateRequestSchema, hosts: NodeHostsSchema }).strict();
export type NodeCertificateRequest = z.infer<typeof NodeCertificateRequestSchema>;
export const NodeCertificateReplySchema = z.object({ certificate: z.string(), caCertificate: z.string() }).strict();
export type NodeCertificateReply = z.infer<typeof NodeCertificateReplySchema>;
export const RevokedCredentialSchema = z.object({ nodeId: NodeIdSchema, revoked: z.boolean() }).strict();
