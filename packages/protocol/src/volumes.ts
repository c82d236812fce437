import { z } from 'zod';
import { CheckpointIdSchema } from './checkpoints.js';
import { Limits } from './limits.js';

/** A tenant's volume name: lowercase letters, digits and dashes (no path can be made of it). */
export const VolumeNameSchema = z.string().regex(/^[a-z][a-z0-9-]{0,62}$/, 'volume names are lowercase letters, digits and dashes, starting with a letter');

/** A volume as nodes name it. */
export const VolumeIdSchema = z.string().regex(/^vol_[a-z0-9]{12}$/, 'volume ids look like vol_ and 12 lowercase letters or digits');
/** A snapshot of a volume. */
export const VolumeSnapshotIdSchema = z.string().regex(/^vsn_[a-z0-9]{12}$/, 'volume snapshot ids look like vsn_ and 12 lowercase letters or digits');

/** Where the platform itself mounts something in every sandbox: no volume may go there or above it. */
const reservedMountPoints = ['/proc', '/dev', '/sys', '/tmp', '/.space', '/run/space'];

/**
 * Where a volume appears inside the sandbox: an absolute, normalized path (no `.` or `..` segments,
 * no doubled or trailing slash), not `/` and not a directory the platform mounts itself.
 */
export const VolumeMountPathSchema = z
  .string()
  .max(Limits.maxPathLength)
  .regex(/^(\/[A-Za-z0-9._@+-]+)+$/, 'a mount path is absolute, made of letters, digits and . _ @ + -, with no trailing slash')
  .refine((p) => !p.split('/').some((part) => part === '.' || part === '..'), 'a mount path may not contain "." or ".." segments')
  .refine(
    (p) => !reservedMountPoints.some((reserved) => p === reserved || p.startsWith(`${reserved}/`) || reserved.startsWith(`${p}/`)),
    `a volume may not be mounted at or around ${reservedMountPoints.join(', ')}`,
  );

/** A volume a session mounts, as asked at create. */
export const VolumeMountSchema = z
  .object({
    name: VolumeNameSchema,
    path: VolumeMountPathSchema,
    /** Read-only: any number of sessions may mount a volume so; read-write, one session at a time. */
    readOnly: z.boolean().default(false),
  })
  .strict();
export type VolumeMount = z.infer<typeof VolumeMountSchema>;

/** The volumes of a session: each at most once, at paths that neither repeat nor nest. */
export const VolumeMountListSchema = z
  .array(VolumeMountSchema)
  .max(16)
  .default([])
  .refine((list) => new Set(list.map((m) => m.name)).size === list.length, 'a volume may be mounted once per session')
  .refine(
    (list) => list.every((a) => list.every((b) => a === b || (a.path !== b.path && !b.path.startsWith(`${a.path}/`)))),
    'mount paths must not repeat or lie inside one another',
  );

const sizeGbSchema = z
  .number()
  .min(0.1)
  .max(16 * 1024);

export const CreateVolumeRequestSchema = z
  .object({
    name: VolumeNameSchema,
    /** Most data the volume holds, GB (its btrfs quota group); past it writes fail with "Disk quota exceeded". */
    sizeGb: sizeGbSchema.default(10),
    /** Start as a copy of one of the tenant's volume snapshots (on its node). */
    fromSnapshot: VolumeSnapshotIdSchema.optional(),
  })
  .strict();
export type CreateVolumeRequest = z.infer<typeof CreateVolumeRequestSchema>;

export const VolumeSchema = z
  .object({
    name: z.string(),
    sizeGb: z.number(),
    createdAt: z.string(),
    /** The node holding it: sessions that mount it run there. */
    nodeId: z.string(),
    /** Bytes it holds now (null where the node cannot tell; only on GET /v1/volumes/:name). */
    usedBytes: z.number().int().nonnegative().nullable().optional(),
    fromSnapshot: z.string().nullable(),
    /** A fork's copy of a volume belongs to the fork and is deleted with it; null for volumes made with POST /v1/volumes. */
    ownerSessionId: z.string().nullable(),
    /** The sessions mounting it. */
    mounts: z.array(z.object({ sessionId: z.string(), path: z.string(), readOnly: z.boolean() }).strict()),
  })
  .strict();
export type Volume = z.infer<typeof VolumeSchema>;
export const VolumeListSchema = z.object({ volumes: z.array(VolumeSchema) }).strict();

export const VolumeSnapshotSchema = z.object({ id: z.string(), volume: z.string(), createdAt: z.string() }).strict();
export type VolumeSnapshot = z.infer<typeof VolumeSnapshotSchema>;
export const VolumeSnapshotListSchema = z.object({ snapshots: z.array(VolumeSnapshotSchema) }).strict();

/** Control plane -> node agent: a volume a sandbox mounts. */
export const NodeVolumeMountSchema = z.object({ volumeId: VolumeIdSchema, path: VolumeMountPathSchema, readOnly: z.boolean() }).strict();
export type NodeVolumeMount = z.infer<typeof NodeVolumeMountSchema>;

/** Control plane -> node agent: make a volume, empty, from a snapshot, or from a checkpoint's copy of another volume (a fork). */
export const NodeCreateVolumeRequestSchema = z
  .object({
    volumeId: VolumeIdSchema,
    sizeGb: sizeGbSchema,
    from: z
      .union([z.object({ snapshotId: VolumeSnapshotIdSchema }).strict(), z.object({ checkpointId: CheckpointIdSchema, volumeId: VolumeIdSchema }).strict()])
      .optional(),
  })
  .strict();
export type NodeCreateVolumeRequest = z.infer<typeof NodeCreateVolumeRequestSchema>;

/** Control plane -> node agent: snapshot a volume; the writes of the session mounting it read-write are flushed first. */
export const NodeVolumeSnapshotRequestSchema = z
  .object({
    snapshotId: VolumeSnapshotIdSchema,
    flushSession: z
      .string()
      .regex(/^ses_[A-Za-z0-9]{6,40}$/)
      .optional(),
  })
  .strict();

/** Control plane -> node agent: put a checkpoint's copy of a volume (`sourceVolumeId`'s) in place of the volume's files. */
export const NodeVolumeRestoreRequestSchema = z.object({ checkpointId: CheckpointIdSchema, sourceVolumeId: VolumeIdSchema }).strict();

/** Node agent -> control plane: what a volume holds and may hold (null where quotas are off). */
export const NodeVolumeUsageSchema = z
  .object({ usage: z.object({ bytes: z.number().int().nonnegative(), limitBytes: z.number().nullable() }).strict().nullable() })
  .strict();
