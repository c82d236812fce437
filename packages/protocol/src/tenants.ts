import { z } from 'zod';

export const CreateTenantRequestSchema = z.object({ name: z.string().min(1).max(128) }).strict();
export const TenantSchema = z.object({ id: z.string(), name: z.string(), createdAt: z.string() }).strict();
export type Tenant = z.infer<typeof TenantSchema>;

export const CreateKeyRequestSchema = z
  .object({
    tenantId: z.string().min(1).max(64),
    /** `e2b`: a key shaped like E2B's (`e2b_` and 40 hex digits), for code or tools that check that shape; `space` (default): `sk_…`. */
    format: z.enum(['space', 'e2b']).default('space'),
  })
  .strict();
/** The web console's sign-in (`POST /console/session`): a tenant's API key, kept in an HttpOnly cookie. */
export const ConsoleSignInRequestSchema = z.object({ key: z.string().min(1).max(512) }).strict();

/** The key itself is shown once, in this response; only its hash is stored. */
export const CreatedKeySchema = z.object({ id: z.string(), tenantId: z.string(), key: z.string() }).strict();

/**
 * The limits a tenant is held to, each with what it uses now. Past `max`, calls are refused with
 * QUOTA_EXCEEDED (403) or TOO_MANY_REQUESTS (429 with Retry-After) naming the limit and the setting
 * that raises it. Concurrency and rate are counted per control-plane process.
 */
export const TenantLimitNameSchema = z.enum(['sessions', 'concurrentCreates', 'requestsPerSec', 'openRequests', 'openStreams', 'checkpointStorageBytes']);
export type TenantLimitName = z.infer<typeof TenantLimitNameSchema>;

const LimitUseSchema = z.object({ max: z.number().nonnegative(), used: z.number().nonnegative(), setting: z.string() }).strict();
export const TenantLimitsSchema = z
  .object({ tenantId: z.string(), limits: z.record(TenantLimitNameSchema, LimitUseSchema), defaultDiskGb: z.number().positive() })
  .strict();
export type TenantLimitsView = z.infer<typeof TenantLimitsSchema>;
