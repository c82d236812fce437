import { z } from 'zod';

export const CheckpointKindSchema = z.enum(['fs']);

export const CreateCheckpointRequestSchema = z
  .object({
    /** `fs`: a read-only btrfs snapshot of the session's filesystem, taken after flushing its writes. */
    kind: CheckpointKindSchema.default('fs'),
  })
  .strict();

export const CheckpointSchema = z
  .object({
    id: z.string(),
    sessionId: z.string(),
    kind: CheckpointKindSchema,
    trigger: z.enum(['manual', 'auto']),
    createdAt: z.string(),
  })
  .strict();
export type Checkpoint = z.infer<typeof CheckpointSchema>;

export const CheckpointListSchema = z.object({ checkpoints: z.array(CheckpointSchema) }).strict();

export const ForkRequestSchema = z.object({ count: z.number().int().min(1).max(16).default(1) }).strict();
export const RestoreRequestSchema = z.object({ checkpointId: z.string().min(1).max(64) }).strict();

/** Control plane -> node agent. */
export const NodeCheckpointRequestSchema = z.object({ checkpointId: z.string().regex(/^ckp_[a-z0-9]{6,40}$/) }).strict();
export const NodeCheckpointSchema = z.object({ checkpointId: z.string(), createdAt: z.string() }).strict();
