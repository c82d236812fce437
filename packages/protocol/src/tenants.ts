import { z } from 'zod';

export const CreateTenantRequestSchema = z.object({ name: z.string().min(1).max(128) }).strict();
export const TenantSchema = z.object({ id: z.string(), name: z.string(), createdAt: z.string() }).strict();
export type Tenant = z.infer<typeof TenantSchema>;

export const CreateKeyRequestSchema = z.object({ tenantId: z.string().min(1).max(64) }).strict();
/** The key itself is shown once, in this response; only its hash is stored. */
export const CreatedKeySchema = z.object({ id: z.string(), tenantId: z.string(), key: z.string() }).strict();
