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
    /** The same on the port's own host, `<port>-<session id without ses_>.<SPACE_PREVIEW_DOMAIN>`; null when that setting is unset. */
    hostUrl: z.string().nullable(),
    expiresAt: z.string(),
  })
  .strict();
export type PreviewToken = z.infer<typeof PreviewTokenSchema>;

/**
 * The host of a port's preview URL under a wildcard domain: `<port>-<session id without ses_>.<domain>`
 * (no underscore: it is not allowed in host names). `ses_` may be kept: E2B's SDK puts its sandbox id there whole.
 */
export function previewHost(port: number, sessionId: string, domain: string): string {
  return `${port}-${sessionId.replace(/^ses_/, '')}.${domain}`;
}

/** The port and session a preview host names, or null when `host` (lowercase, maybe with `:port`) is not one under `domain`. */
export function parsePreviewHost(host: string, domain: string): { port: string; sessionId: string } | null {
  const suffix = `.${domain.toLowerCase()}`;
  const name = host.replace(/:\d+$/, '');
  if (!name.endsWith(suffix)) return null;
  const match = /^(\d{1,5})-(?:ses_)?([a-z0-9]{6,40})$/.exec(name.slice(0, -suffix.length));
  return match ? { port: match[1]!, sessionId: `ses_${match[2]}` } : null;
}
