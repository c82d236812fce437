import { z } from 'zod';
import { CheckpointIdSchema } from './checkpoints.js';
import { VolumeIdSchema } from './volumes.js';

/**
 * A ship base: a full copy of one of a session's checkpoints in the object store (with its copies
 * of the session's read-write volumes), which later checkpoints are sent as differences to.
 */
export const ShipBaseIdSchema = z.string().regex(/^bse_[a-z0-9]{6,40}$/);

/** A tenant's data key, which its checkpoint objects are encrypted under (kept wrapped by the cluster key in the store). */
export const DataKeyIdSchema = z.string().regex(/^dk_[a-z0-9]{6,40}$/);

/**
 * Control plane -> node, with every call that stores or reads a session's objects: its tenant's data
 * key, unwrapped (256 bits, base64); the node holds it for that call only.
 */
export const DataKeySchema = z.object({ id: DataKeyIdSchema, key: z.string().regex(/^[A-Za-z0-9+/]{43}=$/, 'a 256-bit key in base64') }).strict();
export type DataKey = z.infer<typeof DataKeySchema>;

/** An object in the object store, with what it must read back as (its stored, encrypted bytes) and the data key it is sealed with. */
export const StoredObjectSchema = z
  .object({
    key: z
      .string()
      .max(512)
      // Under a spreading prefix of two hex digits (objects stored before have none).
      .regex(/^(checkpoints|bases)\/([0-9a-f]{2}\/)?[a-z0-9_]+(\.vol_[a-z0-9]+)?\.(send|memory\.tar)$/),
    bytes: z.number().int().nonnegative(),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    /** Absent on objects stored before encryption at rest: those are read as they are. */
    dataKeyId: DataKeyIdSchema.optional(),
    /** The checkpoint's (or base's) copy of this volume of the session, not the session's own files. */
    volumeId: VolumeIdSchema.optional(),
  })
  .strict();
export type StoredObject = z.infer<typeof StoredObjectSchema>;

/** A session mounts at most 16 volumes: a checkpoint's objects are its files, its memory image and a copy of each. */
const maxObjects = 2 + 16;

export const ShipBaseSchema = z
  .object({
    id: ShipBaseIdSchema,
    object: StoredObjectSchema,
    /** Its copies of the session's read-write volumes (absent on bases made before volumes were shipped). */
    volumes: z.array(StoredObjectSchema).max(16).optional(),
  })
  .strict();
export type ShipBase = z.infer<typeof ShipBaseSchema>;

/** Control plane -> node: make a base of a checkpoint the node holds (its volume copies too) and store it, sealed with `dataKey`. */
export const NodeCreateBaseRequestSchema = z.object({ baseId: ShipBaseIdSchema, fromCheckpointId: CheckpointIdSchema, dataKey: DataKeySchema }).strict();

/** The most ship bases one call asks a node to delete. */
export const maxBasesPerDelete = 500;

/** Control plane -> node: delete these bases' local copies, where it holds any (the others are no-ops). */
export const NodeDeleteBasesRequestSchema = z.object({ baseIds: z.array(ShipBaseIdSchema).min(1).max(maxBasesPerDelete) }).strict();

/**
 * Control plane -> node: store the checkpoint as its difference to `base` (fetched first if the
 * node lacks it), each of its volume copies as a difference to the base's, and its memory image,
 * sealed with `dataKey`.
 */
export const NodeShipRequestSchema = z.object({ base: ShipBaseSchema, dataKey: DataKeySchema }).strict();
export const NodeShippedSchema = z.object({ objects: z.array(StoredObjectSchema).min(1).max(maxObjects) }).strict();

/** Control plane -> node: bring a checkpoint from the object store onto this node (its base first), checking every byte and opening it with `dataKey`. */
export const NodeFetchRequestSchema = z
  .object({ base: ShipBaseSchema, objects: z.array(StoredObjectSchema).min(1).max(maxObjects), dataKey: DataKeySchema })
  .strict();

/** Control plane -> node: delete objects of checkpoints and bases nothing needs any more. */
export const NodeDeleteObjectsRequestSchema = z.object({ keys: z.array(StoredObjectSchema.shape.key).max(1000) }).strict();
