import { z } from 'zod';
import { CheckpointIdSchema } from './checkpoints.js';
import { EnvSchema } from './common.js';
import { CommandSchema } from './exec.js';
import { SecretNameSchema } from './egress.js';
import { ResourcesSchema, TemplateNameSchema, builtinTemplateAliases } from './sessions.js';

/** A tenant's template version as the node names it: `tpl_…`. */
export const TemplateIdSchema = z.string().regex(/^tpl_[a-z0-9]{12}$/, 'template ids look like tpl_ and 12 lowercase letters or digits');

/** The templates every tenant has. Their names (and their aliases') are not available for a tenant's own. */
export const builtinTemplateNames: readonly string[] = ['base', 'tiny', 'code-interpreter', 'desktop'];

/** A build context file's path: relative, no `..`, `.` or empty segments. */
export const ContextPathSchema = z
  .string()
  .min(1)
  .max(1024)
  .refine(
    (p) => !p.startsWith('/') && p.split('/').every((part) => part !== '' && part !== '.' && part !== '..' && !part.includes('\0')),
    'context paths are relative, without ".", ".." or empty segments',
  );

/**
 * A tenant's template from a session (an fs checkpoint of it is taken first), from one of its
 * checkpoints, or built from a Dockerfile (`dockerfile`, with the build context's files as base64
 * in `files`). Creating a name that exists makes a new version of it; new sessions get the newest.
 */
export const CreateTemplateRequestSchema = z
  .object({
    name: TemplateNameSchema.refine((name) => !builtinTemplateNames.includes(name) && !builtinTemplateAliases.has(name), 'that name is a built-in template'),
    fromCheckpoint: z.string().min(1).max(64).optional(),
    fromSession: z.string().min(1).max(64).optional(),
    /** The Dockerfile's text: FROM a template, then RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, LABEL, EXPOSE, CMD, ENTRYPOINT. */
    dockerfile: z
      .string()
      .min(1)
      .max(256 * 1024)
      .optional(),
    /** The build context: path -> file content, base64 (`SPACE_TEMPLATE_MAX_CONTEXT_MB` in all). */
    files: z
      .record(ContextPathSchema, z.string())
      .refine((files) => Object.keys(files).length <= 10_000, 'at most 10,000 context files')
      .optional(),
    /** Context files that are executable (their mode becomes 0755). */
    executables: z.array(ContextPathSchema).max(10_000).optional(),
    /** Values of the Dockerfile's ARGs. */
    buildArgs: EnvSchema.optional(),
    /** Secrets of the tenant the build's RUN steps may use through the gateway (each env var NAME holds its placeholder); never in the template. */
    secrets: z.array(SecretNameSchema).max(64).optional(),
    resources: ResourcesSchema.optional(),
    /** The build is cancelled after this long (default 1800). */
    timeoutSec: z
      .number()
      .int()
      .min(10)
      .max(6 * 3600)
      .optional(),
  })
  .strict()
  .refine(
    (r) => [r.fromCheckpoint, r.fromSession, r.dockerfile].filter((v) => v !== undefined).length === 1,
    'give exactly one of fromCheckpoint, fromSession and dockerfile',
  )
  .refine(
    (r) => r.dockerfile !== undefined || (r.files ?? r.executables ?? r.buildArgs ?? r.secrets ?? r.resources ?? r.timeoutSec) === undefined,
    'files, executables, buildArgs, secrets, resources and timeoutSec go with a dockerfile',
  );
export type CreateTemplateRequest = z.infer<typeof CreateTemplateRequestSchema>;

/** What a session made from a template starts with: from a Dockerfile's ENV, WORKDIR, USER, CMD/ENTRYPOINT, LABEL, EXPOSE. */
export const TemplateConfigSchema = z
  .object({
    env: EnvSchema,
    workdir: z.string().max(4096),
    user: z.string().max(256),
    /** Started as the service `cmd` in every new sandbox of a session made from the template (as `user`, in `workdir`). */
    cmd: CommandSchema.nullable(),
    labels: z.record(z.string().max(1024)),
    expose: z.array(z.number().int()),
  })
  .strict();
export type TemplateConfig = z.infer<typeof TemplateConfigSchema>;

/** A Dockerfile build: started by POST /v1/templates, followed through its log. */
export const TemplateBuildSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    status: z.enum(['running', 'succeeded', 'failed']),
    createdAt: z.string(),
    endedAt: z.string().nullable(),
    /** Why it failed: the step (its Dockerfile line) and the cause. */
    error: z.string().nullable(),
    /** The template version it made. */
    version: z.number().int().nullable(),
    /** Steps that ran, and those taken from the cache. */
    steps: z.number().int().nonnegative(),
    cachedSteps: z.number().int().nonnegative(),
  })
  .strict();
export type TemplateBuild = z.infer<typeof TemplateBuildSchema>;
export const BuildIdSchema = z.string().regex(/^bld_[a-z0-9]{12}$/, 'build ids look like bld_ and 12 lowercase letters or digits');
export const BuildLogQuerySchema = z.object({ follow: z.enum(['0', '1', 'true', 'false']).optional() }).strict();

export const TemplateSchema = z
  .object({
    name: z.string(),
    /** Built-ins: 0. A tenant's template: 1 for the first version, one more for each later one. */
    version: z.number().int().nonnegative(),
    builtIn: z.boolean(),
    /** Where it comes from: a checkpoint (or session), a Dockerfile, an image; built-ins are the platform's. */
    source: z.enum(['built-in', 'checkpoint', 'dockerfile', 'image']),
    /** The checkpoint it was made from (null for built-ins and images). */
    fromCheckpoint: z.string().nullable(),
    createdAt: z.string().nullable(),
    /** Sessions of the tenant created from it (any version). */
    sessions: z.number().int().nonnegative(),
    /** From a Dockerfile: what its sessions start with; null otherwise. */
    config: TemplateConfigSchema.nullable(),
  })
  .strict();
export type Template = z.infer<typeof TemplateSchema>;

export const TemplateListSchema = z.object({ templates: z.array(TemplateSchema) }).strict();

export const DeleteTemplateQuerySchema = z.object({ force: z.enum(['0', '1', 'true', 'false']).optional() }).strict();

/** `POST /v1/templates/:name/image` with a JSON body: pull from a registry the node can reach (else the body is the image archive). */
export const ImportImageRequestSchema = z.object({ image: z.string().regex(/^docker:\/\/[^\s]{1,500}$/, 'images are pulled as docker://REFERENCE') }).strict();

/** Control plane -> node agent: pull an image from a registry (`docker://…`) into template version `templateId`. */
export const NodePullImageRequestSchema = ImportImageRequestSchema;
/** Node agent -> control plane: the imported image's config. */
export const NodeImageImportedSchema = z.object({ config: TemplateConfigSchema }).strict();

/** Control plane -> node agent: make template `templateId` from a checkpoint on the node. */
export const NodeCreateTemplateRequestSchema = z.object({ templateId: TemplateIdSchema, checkpointId: CheckpointIdSchema }).strict();
