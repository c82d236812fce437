import { z } from 'zod';
import { AbsoluteSandboxPathSchema, EnvSchema } from './common.js';
import type { EventStream } from './event-stream.js';
import { Limits } from './limits.js';

/**
 * The code interpreter: contexts (one kernel each, state kept between cells) and cells run in them,
 * answered as a stream of events. Served inside the sandbox by the code interpreter's server,
 * which its agent starts and alone reaches (over a Unix socket).
 */
export const codeLanguages = ['python', 'javascript', 'bash'] as const;
export const CodeLanguageSchema = z.enum(codeLanguages, {
  errorMap: () => ({ message: `supported languages: ${codeLanguages.join(', ')}` }),
});
export type CodeLanguage = z.infer<typeof CodeLanguageSchema>;

/** A context's id: `python`, `javascript` and `bash` name each language's default context, made on first use (python's at start). */
export const CodeContextIdSchema = z
  .string()
  .regex(/^(python|javascript|bash|ctx_[a-z0-9]{12})$/, 'context ids are python, javascript, bash or ctx_ and 12 lowercase letters or digits');

export const CreateCodeContextRequestSchema = z
  .object({
    language: CodeLanguageSchema.default('python'),
    /** Where the kernel runs; by default the session's working directory. */
    cwd: AbsoluteSandboxPathSchema.optional(),
  })
  .strict();
export type CreateCodeContextRequest = z.input<typeof CreateCodeContextRequestSchema>;

export const CodeContextSchema = z
  .object({
    id: CodeContextIdSchema,
    language: CodeLanguageSchema,
    cwd: z.string().max(Limits.maxPathLength),
    createdAt: z.string().max(64),
    /** Cells run since the kernel started (IPython's execution count). */
    executionCount: z.number().int().nonnegative(),
    /** `dead`: its kernel exited (the next cell starts a new one, state lost). */
    state: z.enum(['idle', 'busy', 'dead']),
  })
  .strict();
export type CodeContext = z.infer<typeof CodeContextSchema>;

export const CodeContextListSchema = z.object({ contexts: z.array(CodeContextSchema).max(Limits.maxCodeContexts) }).strict();
export const CodeContextParamsSchema = z.object({ contextId: CodeContextIdSchema }).strict();

export const RunCodeRequestSchema = z
  .object({
    code: z.string().refine((code) => Buffer.byteLength(code) <= Limits.maxCodeBytes, `code is at most ${Limits.maxCodeBytes} bytes`),
    /** The context to run in; by default the language's default context. */
    contextId: CodeContextIdSchema.optional(),
    /** Picks the default context of a language (python by default); with `contextId`, must be that context's. */
    language: CodeLanguageSchema.optional(),
    /** Environment variables for this cell only. */
    env: EnvSchema.optional(),
    /** The cell is interrupted past this (SIGINT to the kernel, restarted if it does not stop). */
    timeoutMs: z.number().int().min(1).max(Limits.maxExecTimeoutMs).default(Limits.defaultCodeTimeoutMs),
  })
  .strict();
export type RunCodeRequest = z.input<typeof RunCodeRequestSchema>;

/** A MIME bundle as the kernel gave it: `text/plain`, `text/html`, `image/png` (base64), `application/json` (a value), … */
export const MimeBundleSchema = z.record(z.string().max(128), z.unknown()).refine((bundle) => Object.keys(bundle).length <= 32, 'at most 32 MIME types');

const text = z.string().max(Limits.maxCodeStreamChunkBytes);

/** One line of a run's stream: output while the cell runs, then `end` (always last, also after an `error`). */
export const CodeEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('stdout'), text }).strict(),
  z.object({ type: z.literal('stderr'), text }).strict(),
  z
    .object({
      type: z.literal('result'),
      /** The cell's value (IPython's `execute_result`); other results are displays (`display_data`: a chart, `display(df)`). */
      isMainResult: z.boolean(),
      data: MimeBundleSchema,
    })
    .strict(),
  z
    .object({
      type: z.literal('error'),
      /** The exception's class (`ZeroDivisionError`), or SPACE's: `KernelDied`, `KernelRestarted`, `TimeoutError`, `ExitStatus` (bash), `OutputError`. */
      name: z.string().max(1024),
      value: z.string().max(16 * 1024),
      /** Its traceback, one entry per frame, colours removed. */
      traceback: z.array(z.string().max(16 * 1024)).max(200),
    })
    .strict(),
  z
    .object({
      type: z.literal('end'),
      contextId: CodeContextIdSchema,
      executionCount: z.number().int().nonnegative(),
      durationMs: z.number().int().nonnegative(),
    })
    .strict(),
]);
export type CodeEvent = z.infer<typeof CodeEventSchema>;

/**
 * A cell a context remembers (its newest 20, each with up to 512 KiB of its events): kept with the
 * kernel, so a full checkpoint holds it too. `executionCount` is null while the cell runs.
 */
export const CodeCellSchema = z
  .object({
    code: z.string().max(64 * 1024),
    startedAt: z.string().max(64),
    executionCount: z.number().int().nonnegative().nullable(),
    /** What the cell sent, as the run's stream did; a cell whose caller left ends with an `Interrupted` error. */
    events: z.array(CodeEventSchema).max(10_000),
  })
  .strict();
export type CodeCell = z.infer<typeof CodeCellSchema>;
export const CodeHistorySchema = z.object({ cells: z.array(CodeCellSchema).max(20) }).strict();

/** A run's stream between the layers: `end` is last; errors and the end pass any output bound; what a relay says comes as stderr, or as an error when the stream broke off. */
export const codeEventStream: EventStream = {
  event: CodeEventSchema,
  isFinal: (event) => (event as CodeEvent).type === 'end',
  alwaysPasses: (event) => ['error', 'end'].includes((event as CodeEvent).type),
  notice: (message, broken) =>
    broken ? { type: 'error', name: 'OutputError', value: `space: ${message}`, traceback: [] } : { type: 'stderr', text: `\n[space: ${message}]\n` },
};
