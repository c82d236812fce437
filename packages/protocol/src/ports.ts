import { z } from 'zod';
import { SandboxLayout } from './sandbox-layout.js';

/** A port of a sandbox that may be reached from outside: 1-65535, not the in-sandbox agent's own. */
export const PreviewPortSchema = z.coerce
  .number()
  .int()
  .min(1)
  .max(65535)
  .refine((port) => port !== SandboxLayout.daemonPort, `port ${SandboxLayout.daemonPort} is the sandbox agent's own`);

/** A TCP port something in the sandbox listens on. */
export const ListeningPortSchema = z.object({ port: z.number().int().min(1).max(65535), address: z.string().max(64) }).strict();
export const ListeningPortsSchema = z.object({ ports: z.array(ListeningPortSchema).max(65535) }).strict();
export type ListeningPort = z.infer<typeof ListeningPortSchema>;

/** A preview token: reaches one port of one session, until it expires or is revoked. */
export const CreatePreviewTokenRequestSchema = z
  .object({
    /** How long the token works, seconds (default 1 hour, at most 30 days). */
    ttlSec: z
      .number()
      .int()
      .min(1)
      .max(30 * 24 * 3600)
      .default(3600),
  })
  .strict();

export const PreviewTokenSchema = z
  .object({
    token: z.string(),
    /** The port's URL with the token: opening it sets a cookie, so the page's own links work. */
    url: z.string(),
    expiresAt: z.string(),
  })
  .strict();
export type PreviewToken = z.infer<typeof PreviewTokenSchema>;
