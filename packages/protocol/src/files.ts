import { z } from 'zod';
import { SandboxPathSchema } from './common.js';
import { Limits } from './limits.js';

export const FileTypeSchema = z.enum(['file', 'directory', 'symlink', 'other']);

export const FileStatSchema = z
  .object({
    path: z.string().max(Limits.maxPathLength),
    name: z.string().max(4096),
    type: FileTypeSchema,
    size: z.number().int().nonnegative(),
    mode: z.number().int().nonnegative(),
    mtime: z.string().max(64),
    target: z.string().max(Limits.maxPathLength).optional(),
  })
  .strict();
export type FileStat = z.infer<typeof FileStatSchema>;

export const FileListSchema = z.object({ path: z.string(), entries: z.array(FileStatSchema).max(Limits.maxListEntries), truncated: z.boolean() }).strict();
export type FileList = z.infer<typeof FileListSchema>;

export const PathQuerySchema = z.object({ path: SandboxPathSchema }).strict();
export const MkdirRequestSchema = z.object({ path: SandboxPathSchema, recursive: z.boolean().optional() }).strict();
export const MoveRequestSchema = z.object({ from: SandboxPathSchema, to: SandboxPathSchema, overwrite: z.boolean().optional() }).strict();
export const RemoveQuerySchema = z.object({ path: SandboxPathSchema, recursive: z.enum(['true', 'false']).optional() }).strict();

export const WatchEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ready'), path: z.string().max(Limits.maxPathLength) }).strict(),
  z.object({ type: z.literal('change'), event: z.enum(['rename', 'change']), path: z.string().max(Limits.maxPathLength * 2) }).strict(),
  z.object({ type: z.literal('error'), code: z.string().max(64), message: z.string().max(4096) }).strict(),
]);
export type WatchEvent = z.infer<typeof WatchEventSchema>;
