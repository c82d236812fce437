import { z } from 'zod';
import { Limits } from './limits.js';

/** Environment variables: names as POSIX shells accept them, values without NUL bytes. */
export const EnvSchema = z
  .record(
    z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'env names must match [A-Za-z_][A-Za-z0-9_]*')
      .max(256),
    z
      .string()
      .max(128 * 1024)
      .refine((v) => !v.includes('\0'), 'env values may not contain NUL'),
  )
  .refine((env) => Object.keys(env).length <= Limits.maxEnvEntries, `at most ${Limits.maxEnvEntries} env entries`);

/**
 * A path inside a sandbox: absolute, or relative to the sandbox's working directory.
 * `..` segments are refused outright rather than resolved, so a path always names what it says.
 */
export const SandboxPathSchema = z
  .string()
  .min(1, 'path must not be empty')
  .max(Limits.maxPathLength)
  .refine((p) => !p.includes('\0'), 'path may not contain NUL bytes')
  .refine((p) => !p.split('/').includes('..'), 'path may not contain ".." segments');

/** A sandbox path that names where it is from the root (a default working directory). */
export const AbsoluteSandboxPathSchema = SandboxPathSchema.refine((p) => p.startsWith('/'), 'path must be absolute');

export const SignalSchema = z.enum(['SIGTERM', 'SIGKILL', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGSTOP', 'SIGCONT', 'SIGWINCH']);
export type Signal = z.infer<typeof SignalSchema>;

export const IdSchema = z.string().regex(/^[a-z]{2,4}_[A-Za-z0-9]{6,40}$/, 'malformed id');

/** The reply of an operation that has nothing else to say. */
export const OkSchema = z.object({ ok: z.literal(true) }).strict();
