import { z } from 'zod';
import { CheckpointIdSchema } from './checkpoints.js';
import { TemplateNameSchema } from './sessions.js';

/** A tenant's template version as the node names it: `tpl_…`. */
export const TemplateIdSchema = z.string().regex(/^tpl_[a-z0-9]{12}$/, 'template ids look like tpl_ and 12 lowercase letters or digits');

/** The templates every tenant has. Their names are not available for a tenant's own. */
export const builtinTemplateNames: readonly string[] = ['base', 'tiny'];

/**
 * A tenant's template from a session (an fs checkpoint of it is taken first) or from one of its
 * checkpoints. Creating a name that exists makes a new version of it; new sessions get the newest.
 */
export const CreateTemplateRequestSchema = z
  .object({
    name: TemplateNameSchema.refine((name) => !builtinTemplateNames.includes(name), 'that name is a built-in template'),
    fromCheckpoint: z.string().min(1).max(64).optional(),
    fromSession: z.string().min(1).max(64).optional(),
  })
  .strict()
  .refine((r) => (r.fromCheckpoint === undefined) !== (r.fromSession === undefined), 'give exactly one of fromCheckpoint and fromSession');
export type CreateTemplateRequest = z.infer<typeof CreateTemplateRequestSchema>;

export const TemplateSchema = z
  .object({
    name: z.string(),
    /** Built-ins: 0. A tenant's template: 1 for the first version, one more for each later one. */
    version: z.number().int().nonnegative(),
    builtIn: z.boolean(),
    /** The checkpoint it was made from (null for built-ins). */
    fromCheckpoint: z.string().nullable(),
    createdAt: z.string().nullable(),
    /** Sessions of the tenant created from it (any version). */
    sessions: z.number().int().nonnegative(),
  })
  .strict();
export type Template = z.infer<typeof TemplateSchema>;

export const TemplateListSchema = z.object({ templates: z.array(TemplateSchema) }).strict();

export const DeleteTemplateQuerySchema = z.object({ force: z.enum(['0', '1', 'true', 'false']).optional() }).strict();

/** Control plane -> node agent: make template `templateId` from a checkpoint on the node. */
export const NodeCreateTemplateRequestSchema = z.object({ templateId: TemplateIdSchema, checkpointId: CheckpointIdSchema }).strict();
