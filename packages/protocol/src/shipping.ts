import { z } from 'zod';
import { CheckpointIdSchema } from './checkpoints.js';

/** A ship base: a full copy of one of a session's checkpoints in the object store, which later checkpoints are sent as differences to. */
export const ShipBaseIdSchema = z.string().regex(/^bse_[a-z0-9]{6,40}$/);

/** An object in the object store, with what it must read back as. */
export const StoredObjectSchema = z
  .object({
    key: z
      .string()
      .max(512)
      .regex(/^(checkpoints|bases)\/[a-z0-9_]+\.(send|memory\.tar)$/),
    bytes: z.number().int().nonnegative(),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
  })
  .strict();
export type StoredObject = z.infer<typeof StoredObjectSchema>;

export const ShipBaseSchema = z.object({ id: ShipBaseIdSchema, object: StoredObjectSchema }).strict();
export type ShipBase = z.infer<typeof ShipBaseSchema>;

/** Control plane -> node: make a base of a checkpoint the node holds and store it. */
export const NodeCreateBaseRequestSchema = z.object({ baseId: ShipBaseIdSchema, fromCheckpointId: CheckpointIdSchema }).strict();

/** Control plane -> node: store the checkpoint as its difference to `base` (fetched first if the node lacks it), and its memory image. */
export const NodeShipRequestSchema = z.object({ base: ShipBaseSchema }).strict();
export const NodeShippedSchema = z.object({ objects: z.array(StoredObjectSchema).min(1).max(2) }).strict();

/** Control plane -> node: bring a checkpoint from the object store onto this node (its base first), checking every byte. */
export const NodeFetchRequestSchema = z.object({ base: ShipBaseSchema, objects: z.array(StoredObjectSchema).min(1).max(2) }).strict();

/** Control plane -> node: delete objects of checkpoints and bases nothing needs any more. */
export const NodeDeleteObjectsRequestSchema = z.object({ keys: z.array(StoredObjectSchema.shape.key).max(1000) }).strict();
