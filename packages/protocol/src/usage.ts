import { z } from 'zod';

/**
 * Usage metering: what a session used, measured where it happens (a node reads its sandboxes'
 * cgroups, volumes and gateway; the store counts checkpoints and their storage), recorded per
 * session and hour. Units are chosen so that totals over years fit 64-bit integers.
 */
const amount = z.number().int().nonnegative();

/** What a node measured of one session over one batch's period. */
export const NodeUsageEntrySchema = z
  .object({
    sessionId: z.string().regex(/^ses_[a-z0-9]{1,40}$/, 'a session id'),
    /** The session's tenant as the sandbox's start named it; null for what the node cannot tell (a stopped session's volume). */
    tenantId: z.string().min(1).max(64).nullable(),
    /** CPU time of the sandbox's cgroup (gVisor's own work included), microseconds. */
    cpuMicros: amount,
    /** Memory of the sandbox's cgroup integrated over time, KiB × seconds. */
    memoryKibSeconds: amount,
    /** Bytes the session's volume holds integrated over time, KiB × seconds. */
    diskKibSeconds: amount,
    /** Request bodies and upgraded traffic the sandbox sent out through the gateway. */
    egressBytesOut: amount,
    /** What came back through the gateway. */
    egressBytesIn: amount,
    /** Requests (and upgrades) the gateway took from the sandbox, allowed or not. */
    egressRequests: amount,
    /** Time a sandbox served the session, milliseconds. */
    sandboxMs: amount,
  })
  .strict();
export type NodeUsageEntry = z.infer<typeof NodeUsageEntrySchema>;

/**
 * One period of a node's measurements, numbered within its ledger: a control plane applies each
 * (ledger, seq) once, however often it is sent, so a batch resent after a control plane died
 * between storing it and acknowledging it is not counted twice.
 */
export const NodeUsageBatchSchema = z
  .object({
    /** The node's ledger (made with its data directory): a wiped node starts a new one, numbered from 1 again. */
    ledger: z.string().regex(/^led_[a-z0-9]{8,40}$/),
    seq: z.number().int().positive(),
    start: z.string().datetime(),
    end: z.string().datetime(),
    entries: z.array(NodeUsageEntrySchema).max(100_000),
  })
  .strict();
export type NodeUsageBatch = z.infer<typeof NodeUsageBatchSchema>;

export const NodeUsageBatchListSchema = z.object({ batches: z.array(NodeUsageBatchSchema).max(1000) }).strict();
export type NodeUsageBatchList = z.infer<typeof NodeUsageBatchListSchema>;

/** Control plane -> node: the batches of `ledger` up to `through` are stored; the node forgets them. */
export const NodeUsageAckSchema = z.object({ ledger: NodeUsageBatchSchema.shape.ledger, through: z.number().int().nonnegative() }).strict();
export type NodeUsageAck = z.infer<typeof NodeUsageAckSchema>;

export const UsageGroupBySchema = z.enum(['tenant', 'session', 'day']);
export type UsageGroupBy = z.infer<typeof UsageGroupBySchema>;

/** `GET /v1/usage`: a period, whole hours (UTC): `from` rounded down, `to` up. */
export const UsageQuerySchema = z
  .object({
    /** Default: 24 hours before `to`. */
    from: z.string().datetime().optional(),
    /** Default: now. */
    to: z.string().datetime().optional(),
    groupBy: UsageGroupBySchema.default('day'),
    /** Only this session's usage. */
    sessionId: z
      .string()
      .regex(/^ses_[a-z0-9]{1,40}$/, 'a session id')
      .optional(),
    /** Only this tenant's (the admin key; a tenant's key sees its own only). */
    tenant: z.string().min(1).max(64).optional(),
  })
  .strict();
export type UsageQuery = z.infer<typeof UsageQuerySchema>;

/** What was used, in the units people bill in. */
export const UsageFiguresSchema = z
  .object({
    cpuSeconds: z.number().nonnegative(),
    memoryGbSeconds: z.number().nonnegative(),
    /** Session volumes on nodes. */
    diskGbHours: z.number().nonnegative(),
    /** Checkpoints' memory images on the nodes, per tenant: a row of its own under `groupBy=session`. */
    checkpointGbHours: z.number().nonnegative(),
    /** Shipped checkpoints' objects in the object store (`SPACE_OBJECT_STORE`), per tenant, on the same row. */
    objectStoreGbHours: z.number().nonnegative(),
    egressBytesOut: amount,
    egressBytesIn: amount,
    egressRequests: amount,
    sandboxSeconds: z.number().nonnegative(),
    checkpoints: amount,
  })
  .strict();
export type UsageFigures = z.infer<typeof UsageFiguresSchema>;

export const UsageRowSchema = UsageFiguresSchema.extend({
  tenantId: z.string(),
  /** Under `groupBy=session`; null on the tenant's checkpoint storage row. */
  sessionId: z.string().nullable().optional(),
  /** Under `groupBy=day`: YYYY-MM-DD (UTC). */
  day: z.string().optional(),
}).strict();
export type UsageRow = z.infer<typeof UsageRowSchema>;

export const UsageReportSchema = z
  .object({
    from: z.string(),
    to: z.string(),
    groupBy: UsageGroupBySchema,
    /** Usage is recorded per session and hour: a period is whole hours. */
    granularity: z.literal('hour'),
    rows: z.array(UsageRowSchema),
    /** More groups than a report holds (10,000): narrow the period, or group by tenant or day. */
    truncated: z.boolean(),
    /** Of the rows returned. */
    totals: UsageFiguresSchema,
  })
  .strict();
export type UsageReport = z.infer<typeof UsageReportSchema>;
