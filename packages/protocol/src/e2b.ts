import { z } from 'zod';
import { EnvSchema } from './common.js';
import { MetadataSchema } from './sessions.js';

/**
 * The E2B API's request shapes that SPACE serves under `/e2b` (E2B's OpenAPI spec; docs/e2b.md).
 * Fields E2B clients send that SPACE does not act on are accepted and ignored, except those whose
 * silent omission would surprise (volume mounts, an MCP gateway): those are refused.
 */

/** E2B timeouts are whole seconds; SPACE's longest session timeout bounds them. */
const timeoutSeconds = z
  .number()
  .int()
  .min(0)
  .max(30 * 24 * 3600);

/** Egress as E2B describes it: CIDRs or domains allowed, CIDRs denied, or no internet at all. */
export const E2bNetworkSchema = z.object({
  allowOut: z.array(z.string().min(1).max(253)).max(256).optional(),
  denyOut: z.array(z.string().min(1).max(253)).max(256).optional(),
  allow_internet_access: z.boolean().optional(),
  /** E2B: its ports are reachable without a token unless false. SPACE keeps ports private but for E2B Desktop's stream (see the create). */
  allowPublicTraffic: z.boolean().optional(),
});
export type E2bNetwork = z.infer<typeof E2bNetworkSchema>;

export const E2bNewSandboxSchema = z.object({
  templateID: z.string().min(1).max(128),
  /** Seconds until the sandbox is killed (or paused, `autoPause`); E2B's default is 15. */
  timeout: timeoutSeconds.default(15),
  autoPause: z.boolean().default(false),
  /** SPACE always gives an access token for the data plane; `secure: false` is accepted and changes nothing. */
  secure: z.boolean().optional(),
  allow_internet_access: z.boolean().optional(),
  network: E2bNetworkSchema.optional(),
  metadata: MetadataSchema.optional(),
  envVars: EnvSchema.optional(),
  volumeMounts: z.array(z.unknown()).max(0, 'volume mounts are not supported by SPACE yet').optional(),
  mcp: z.null({ message: 'the MCP gateway inside sandboxes is not supported by SPACE yet' }).optional(),
});
export type E2bNewSandbox = z.infer<typeof E2bNewSandboxSchema>;

export const E2bTimeoutSchema = z.object({ timeout: timeoutSeconds });
export const E2bRefreshSchema = z.object({ duration: timeoutSeconds.max(3600).optional() });
export const E2bConnectSchema = z.object({ timeout: timeoutSeconds.optional(), memory: z.boolean().optional() });
export const E2bResumeSchema = z.object({ timeout: timeoutSeconds.optional(), autoPause: z.boolean().optional() });
export const E2bPauseSchema = z.object({ memory: z.boolean().optional() });
export const E2bForkSchema = z.object({ timeout: timeoutSeconds.optional(), count: z.number().int().min(1).max(16).default(1) });
export const E2bSnapshotSchema = z.object({ name: z.string().max(32).optional() });

const pageSize = z.coerce.number().int().min(1).max(1000).default(100);

export const E2bListQuerySchema = z.object({
  /** `key=value` pairs, URL-encoded, joined by `&` (then URL-encoded again as one parameter). */
  metadata: z.string().max(8192).optional(),
  /** `running`, `paused`, or both comma-separated. */
  state: z
    .string()
    .regex(/^(running|paused)(,(running|paused))*$/, 'state is running, paused, or both comma-separated')
    .optional(),
  limit: pageSize,
  nextToken: z.string().max(256).optional(),
  template: z.string().max(128).optional(),
  startedAfter: z.string().max(64).optional(),
  order: z.enum(['asc', 'desc']).optional(),
});

export const E2bSnapshotListQuerySchema = z.object({
  sandboxID: z.string().max(128).optional(),
  name: z.string().max(128).optional(),
  limit: pageSize,
  nextToken: z.string().max(256).optional(),
});

/**
 * The envd version SPACE's data plane answers as: the E2B SDK picks its protocol features by it
 * (stdin control, streamed `application/octet-stream` uploads with optional gzip; not file metadata).
 */
export const e2bEnvdVersion = '0.5.7';
