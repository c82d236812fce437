import { z } from 'zod';
import { AbsoluteSandboxPathSchema } from './common.js';
import { CheckpointIdSchema, CheckpointKindSchema } from './checkpoints.js';
import { FileStatSchema, FileTypeSchema } from './files.js';

/**
 * How a path changed from the checkpoint before (in a session's history): `added`, `removed`,
 * `modified` (content, size, type or mode), `unchanged`, `absent` (missing then and now), or
 * `unknown` when the checkpoint's node did not answer.
 */
export const PathChangeSchema = z.enum(['added', 'removed', 'modified', 'unchanged', 'absent', 'unknown']);
export type PathChange = z.infer<typeof PathChangeSchema>;

/** One version of a path: in one checkpoint of the session, oldest first. */
export const PathVersionSchema = z
  .object({
    checkpointId: CheckpointIdSchema,
    createdAt: z.string(),
    kind: CheckpointKindSchema,
    change: PathChangeSchema,
    type: FileTypeSchema.nullable(),
    size: z.number().int().nonnegative().nullable(),
    mtime: z.string().max(64).nullable(),
    /** A regular file's sha256 (null for others, and for files over 256 MiB: compared by size and time). */
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .nullable(),
  })
  .strict();
export type PathVersion = z.infer<typeof PathVersionSchema>;

export const PathHistorySchema = z.object({ path: z.string(), versions: z.array(PathVersionSchema) }).strict();
export type PathHistory = z.infer<typeof PathHistorySchema>;

/** The node's part of a history: the path in each of the checkpoints it holds. */
export const NodePathVersionsRequestSchema = z
  .object({ path: AbsoluteSandboxPathSchema, checkpointIds: z.array(CheckpointIdSchema).min(1).max(1000) })
  .strict();
export const NodePathVersionsSchema = z
  .object({
    versions: z.array(
      z
        .object({
          checkpointId: CheckpointIdSchema,
          stat: FileStatSchema.nullable(),
          sha256: z
            .string()
            .regex(/^[0-9a-f]{64}$/)
            .nullable(),
        })
        .strict(),
    ),
  })
  .strict();

/** A path inside a checkpoint, as the node reads it: absolute (the control plane resolved a relative one against the session's working directory). */
export const NodeCheckpointPathQuerySchema = z.object({ path: AbsoluteSandboxPathSchema }).strict();
