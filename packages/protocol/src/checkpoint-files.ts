import { z } from 'zod';
import { AbsoluteSandboxPathSchema, SandboxPathSchema } from './common.js';
import { CheckpointIdSchema, CheckpointKindSchema } from './checkpoints.js';
import { FileStatSchema, FileTypeSchema } from './files.js';
import { Limits } from './limits.js';

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

/** How a path differs between two checkpoints (`renamed`: `from` names where it was; `mode`: permissions or owner only). */
export const DiffChangeSchema = z.enum(['added', 'removed', 'modified', 'renamed', 'mode']);

export const DiffEntrySchema = z
  .object({
    path: z.string().max(Limits.maxPathLength),
    change: DiffChangeSchema,
    type: FileTypeSchema,
    from: z.string().max(Limits.maxPathLength).optional(),
    sizeBefore: z.number().int().nonnegative().nullable(),
    sizeAfter: z.number().int().nonnegative().nullable(),
  })
  .strict();
export type DiffEntry = z.infer<typeof DiffEntrySchema>;

/** The most entries one page of a diff holds. */
export const maxDiffPage = 1000;

/** What a diff's `to` names to compare with the `from` checkpoint's session's files now. */
export const liveDiffTarget = 'live';

/** A diff's other side: a checkpoint, or `live`. */
export const DiffTargetSchema = z.union([CheckpointIdSchema, z.literal(liveDiffTarget)]);

/** `to`: the other checkpoint; `after`: the last path of the page before (pages are by path); `limit`: entries per page. A node's form: both sides checkpoints it holds. */
export const NodeCheckpointDiffQuerySchema = z
  .object({
    to: CheckpointIdSchema,
    after: z.string().max(Limits.maxPathLength).optional(),
    limit: z.coerce.number().int().min(1).max(maxDiffPage).default(maxDiffPage),
  })
  .strict();

/** The public form: `to` may be `live` (an fs checkpoint of the session is taken, and named in the answer's `to`). */
export const CheckpointDiffQuerySchema = NodeCheckpointDiffQuerySchema.extend({ to: DiffTargetSchema }).strict();

/** One page of a diff, by path; `next`: the `after` of the next page, null on the last. */
export const CheckpointDiffSchema = z
  .object({ from: CheckpointIdSchema, to: CheckpointIdSchema, entries: z.array(DiffEntrySchema).max(maxDiffPage), next: z.string().nullable() })
  .strict();
export type CheckpointDiff = z.infer<typeof CheckpointDiffSchema>;

/** Puts `path` as it was in checkpoint `checkpointId` (of the session's lineage) back into the live session, at `to` (default: the same path). */
export const PathRestoreRequestSchema = z.object({ checkpointId: CheckpointIdSchema, path: SandboxPathSchema, to: SandboxPathSchema.optional() }).strict();

/** What a path restore did: the checkpoint of the session taken first (restore it to undo), and what was written. */
export const PathRestoreResultSchema = z
  .object({
    undoCheckpointId: CheckpointIdSchema,
    path: z.string().max(Limits.maxPathLength),
    files: z.number().int().nonnegative(),
    directories: z.number().int().nonnegative(),
    symlinks: z.number().int().nonnegative(),
    /** FIFOs, sockets and devices: never copied. */
    skipped: z.array(z.string().max(Limits.maxPathLength)).max(1000),
  })
  .strict();
export type PathRestoreResult = z.infer<typeof PathRestoreResultSchema>;

/** One file in two checkpoints of one lineage (or `live`): `GET /v1/checkpoints/:a/diff/file?to=:b&path=`. */
export const FileDiffQuerySchema = z.object({ to: DiffTargetSchema, path: SandboxPathSchema }).strict();

/** The largest file shown as text in a file diff; larger ones and binary ones get sizes and hashes only. */
export const maxTextDiffBytes = 1024 * 1024;

export const FileDiffSchema = z
  .object({
    path: z.string().max(Limits.maxPathLength),
    from: CheckpointIdSchema,
    to: CheckpointIdSchema,
    /** null: the file is not in that checkpoint (or is not a regular file there). */
    sizeBefore: z.number().int().nonnegative().nullable(),
    sizeAfter: z.number().int().nonnegative().nullable(),
    sha256Before: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .nullable(),
    sha256After: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .nullable(),
    /** Both sides are UTF-8 text within `maxTextDiffBytes`. */
    text: z.boolean(),
    /** The unified diff (`''`: the same), or null when not text or too different to show. */
    unified: z.string().nullable(),
  })
  .strict();
export type FileDiff = z.infer<typeof FileDiffSchema>;
