import { z } from 'zod';
import { EnvSchema, SandboxPathSchema, SignalSchema } from './common.js';
import { Limits } from './limits.js';

/** A command: an argv array run directly, or a string run by `/bin/sh -c`. */
export const CommandSchema = z.union([
  z
    .string()
    .min(1, 'cmd must not be empty')
    .max(256 * 1024)
    .refine((c) => !c.includes('\0'), 'cmd may not contain NUL'),
  z
    .array(
      z
        .string()
        .max(256 * 1024)
        .refine((a) => !a.includes('\0'), 'argv may not contain NUL'),
    )
    .min(1, 'cmd must have at least one element')
    .max(Limits.maxArgv)
    .refine((argv) => argv[0] !== '', 'cmd[0] (the program) must not be empty'),
]);
export type Command = z.infer<typeof CommandSchema>;

const execFields = {
  cmd: CommandSchema,
  cwd: SandboxPathSchema.optional(),
  env: EnvSchema.optional(),
  timeoutMs: z.number().int().positive().max(Limits.maxExecTimeoutMs).optional(),
};

export const ExecRequestSchema = z
  .object({
    ...execFields,
    stdin: z.string().max(Limits.maxExecStdinBytes).optional(),
    /** Start the command and return its pid at once; it keeps running and can be re-attached. */
    background: z.boolean().optional(),
  })
  .strict();
export type ExecRequest = z.infer<typeof ExecRequestSchema>;

export const ExecResultSchema = z
  .object({
    exitCode: z.number().int(),
    stdout: z.string(),
    stderr: z.string(),
    signal: z.string().nullable().optional(),
    timedOut: z.boolean().optional(),
    truncated: z.boolean().optional(),
    durationMs: z.number().nonnegative().optional(),
  })
  .strict();
export type ExecResult = z.infer<typeof ExecResultSchema>;

export const BackgroundStartedSchema = z.object({ pid: z.number().int().positive() }).strict();

/**
 * Names one process apart from any other with its pid (in another sandbox of the session, or
 * started after a restore); a process restored from a full checkpoint keeps it. Absent from
 * sandboxes restored from checkpoints older than it.
 */
export const ProcessInstanceSchema = z.string().regex(/^[0-9a-f]{16}$/, 'instance must be 16 hex digits');

export const ProcessInfoSchema = z
  .object({
    pid: z.number().int().positive(),
    instance: ProcessInstanceSchema.optional(),
    cmd: CommandSchema,
    startedAt: z.string(),
    running: z.boolean(),
    exitCode: z.number().int().nullable(),
    pty: z.boolean(),
  })
  .strict();
export type ProcessInfo = z.infer<typeof ProcessInfoSchema>;
/**
 * `untracked`: live processes in the sandbox that the daemon did not start (`nohup … &`, `setsid`,
 * detached daemons): a full checkpoint saves them too. Absent from sandboxes restored from older checkpoints.
 */
export const ProcessListSchema = z.object({ processes: z.array(ProcessInfoSchema).max(10_000), untracked: z.number().int().nonnegative().optional() }).strict();
export type ProcessList = z.infer<typeof ProcessListSchema>;

/** Whether any process runs in the sandbox besides its init and daemon, however it was started. */
export function anyProcessRuns(list: ProcessList): boolean {
  return list.processes.some((p) => p.running) || (list.untracked ?? 0) > 0;
}

export const SignalRequestSchema = z.object({ signal: SignalSchema }).strict();

/** First message a client sends on an exec stream. */
export const ExecStreamStartSchema = z.object({ type: z.literal('start'), ...execFields }).strict();
export type ExecStreamStart = z.infer<typeof ExecStreamStartSchema>;

/** First message a client sends on a PTY stream. */
export const PtyStartSchema = z
  .object({
    type: z.literal('start'),
    cmd: CommandSchema.optional(),
    cwd: SandboxPathSchema.optional(),
    env: EnvSchema.optional(),
    cols: z.number().int().min(1).max(1000).default(80),
    rows: z.number().int().min(1).max(1000).default(24),
  })
  .strict();
export type PtyStart = z.infer<typeof PtyStartSchema>;

const base64 = z
  .string()
  .max(Math.ceil((Limits.maxStreamMessageBytes * 4) / 3) + 4)
  .regex(/^[A-Za-z0-9+/]*={0,2}$/, 'data must be base64');

/**
 * Re-attach: replay the kept output from offset `after` on (what the client has not seen yet).
 * `instance` (from `started`) refuses a pid that now names another process; `sandbox` (the
 * `sandboxId` of `started`) makes a stream whose sandbox is gone end with SANDBOX_DIED instead of
 * finding another process there, unless its process was restored into the new one.
 */
export const AttachQuerySchema = z
  .object({
    after: z.coerce.number().int().nonnegative().default(0),
    instance: ProcessInstanceSchema.optional(),
    sandbox: z
      .string()
      .regex(/^sbx_[a-z0-9]{1,32}$/, 'sandbox must be a sandbox id')
      .optional(),
  })
  .strict();

/** Messages a client sends after `start` on an exec, attach or PTY stream. */
export const ClientStreamMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('stdin'), data: base64 }).strict(),
  z.object({ type: z.literal('stdin-eof') }).strict(),
  z.object({ type: z.literal('signal'), signal: SignalSchema }).strict(),
  z.object({ type: z.literal('resize'), cols: z.number().int().min(1).max(1000), rows: z.number().int().min(1).max(1000) }).strict(),
]);
export type ClientStreamMessage = z.infer<typeof ClientStreamMessageSchema>;

/** Messages a server (daemon, relayed by node and control plane) sends on a stream. */
export const ServerStreamMessageSchema = z.discriminatedUnion('type', [
  // `instance` and `produced` (the output so far) come from the daemon, `sandboxId` from the control
  // plane: what a re-attach sends back (AttachQuerySchema).
  z
    .object({
      type: z.literal('started'),
      pid: z.number().int().positive(),
      instance: ProcessInstanceSchema.optional(),
      produced: z.number().int().nonnegative().optional(),
      sandboxId: z.string().max(64).optional(),
    })
    .strict(),
  // `offset`: where the chunk starts in the process's output (stdout and stderr together), so a client
  // that re-attaches with `?after=` can drop what it already has.
  z.object({ type: z.literal('stdout'), data: base64, offset: z.number().int().nonnegative().optional() }).strict(),
  z.object({ type: z.literal('stderr'), data: base64, offset: z.number().int().nonnegative().optional() }).strict(),
  z.object({ type: z.literal('exit'), exitCode: z.number().int(), signal: z.string().max(32).nullable(), timedOut: z.boolean().optional() }).strict(),
  z.object({ type: z.literal('error'), code: z.string().max(64), message: z.string().max(4096) }).strict(),
]);
export type ServerStreamMessage = z.infer<typeof ServerStreamMessageSchema>;
