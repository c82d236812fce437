import { isIP } from 'node:net';
import { z } from 'zod';

/** A DNS name as the gateway accepts it: lowercase labels of letters, digits, `_` and inner `-`. */
export const dnsNamePattern = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/**
 * A host name pattern: `api.example.com`, or `*.example.com` for every name below example.com at
 * any depth (not example.com itself). Lowercase; compared without a trailing dot.
 */
export const HostPatternSchema = z
  .string()
  .max(253)
  .transform((h) => h.toLowerCase().replace(/\.$/, ''))
  .refine(
    (h) => dnsNamePattern.test(h.startsWith('*.') ? h.slice(2) : h),
    'a host pattern is a DNS name, optionally starting with "*." (e.g. api.example.com, *.example.com)',
  );

/** An IPv4 or IPv6 network in CIDR notation, e.g. 203.0.113.0/24 or 2001:db8::/32. */
export const CidrSchema = z
  .string()
  .max(64)
  .refine((c) => {
    const [address, prefix, extra] = c.split('/');
    const family = isIP(address ?? '');
    if (!family || prefix === undefined || extra !== undefined || !/^\d{1,3}$/.test(prefix)) return false;
    return Number(prefix) <= (family === 4 ? 32 : 128);
  }, 'a CIDR is an address and a prefix length, e.g. 203.0.113.0/24');

/**
 * What a session's sandbox may reach through its node's gateway. `allow-all` admits every public
 * address; `deny-all` nothing; `allow-list` only hosts matching `domains` or whose address is in
 * `cidrs`. Loopback, link-local and the platform's own addresses are never reachable.
 */
export const EgressPolicySchema = z
  .object({
    mode: z.enum(['allow-all', 'deny-all', 'allow-list']).default('allow-all'),
    domains: z.array(HostPatternSchema).max(256).default([]),
    cidrs: z.array(CidrSchema).max(256).default([]),
  })
  .strict()
  .refine((p) => p.mode === 'allow-list' || (p.domains.length === 0 && p.cidrs.length === 0), 'domains and cidrs belong to mode "allow-list"')
  .refine(
    (p) => p.mode !== 'allow-list' || p.domains.length + p.cidrs.length > 0,
    'mode "allow-list" needs at least one domain or CIDR (use "deny-all" to block everything)',
  );
export type EgressPolicy = z.infer<typeof EgressPolicySchema>;

/** Secret names double as the env var that holds the placeholder inside the sandbox. */
export const SecretNameSchema = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'secret names are env var names: letters, digits and _, not starting with a digit');

/**
 * A secret a session may use, as requests give it and sessions show it: a name grants the tenant's
 * secret of that name (env var NAME holds its placeholder); `{name, secret}` gives env var `name`
 * the value and hosts of the tenant's secret `secret` (a fork with a read-only token under the name
 * its processes already use).
 */
export const SecretGrantSchema = z.union([SecretNameSchema, z.object({ name: SecretNameSchema, secret: SecretNameSchema }).strict()]);
export type SecretGrantInput = z.infer<typeof SecretGrantSchema>;
/** A grant as the platform works with it: env var `name`, tenant secret `secret`. */
export interface SecretGrant {
  name: string;
  secret: string;
}

export const grantOf = (grant: SecretGrantInput): SecretGrant => (typeof grant === 'string' ? { name: grant, secret: grant } : grant);
/** A grant as the API shows it: a plain name when env var and secret have the same name. */
export const grantShown = ({ name, secret }: SecretGrant): SecretGrantInput => (name === secret ? name : { name, secret });

/** A session's grants: at most 64, each env var once. */
export const SecretGrantsSchema = z
  .array(SecretGrantSchema)
  .max(64)
  .transform((grants) => grants.map(grantOf))
  .refine((grants) => new Set(grants.map((g) => g.name)).size === grants.length, 'secret names must not repeat');

export const PutSecretRequestSchema = z
  .object({
    // No CR or LF: the value goes into HTTP headers.
    value: z
      .string()
      .min(1)
      .max(8192)
      .refine((v) => !/[\r\n\0]/.test(v), 'secret values may not contain CR, LF or NUL'),
    /** The only hosts the value is ever sent to. */
    hosts: z.array(HostPatternSchema).min(1).max(64),
  })
  .strict();
export type PutSecretRequest = z.infer<typeof PutSecretRequestSchema>;

/** A secret as the API shows it: never its value. */
export const SecretSchema = z
  .object({
    name: z.string(),
    hosts: z.array(z.string()),
    /** What the sandbox sees in place of the value (env var `name`). */
    placeholder: z.string(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .strict();
export type Secret = z.infer<typeof SecretSchema>;
export const SecretListSchema = z.object({ secrets: z.array(SecretSchema) }).strict();

/** One request a sandbox sent out through the gateway. Secret names only, never values. */
export const EgressAuditEntrySchema = z
  .object({
    time: z.string(),
    sandboxId: z.string(),
    scheme: z.enum(['http', 'https']),
    host: z.string(),
    method: z.string(),
    /** Path and query as the sandbox sent them (placeholders, not values), cut at 512 characters. */
    path: z.string(),
    /** The upstream's status, or the gateway's own (403 denied, 502 unreachable). */
    status: z.number().int(),
    decision: z.enum(['allowed', 'denied', 'failed']),
    bytesSent: z.number().int().nonnegative(),
    bytesReceived: z.number().int().nonnegative(),
    durationMs: z.number().nonnegative(),
    secrets: z.array(z.string()),
    reason: z.string().optional(),
  })
  .strict();
export type EgressAuditEntry = z.infer<typeof EgressAuditEntrySchema>;

export const EgressAuditQuerySchema = z.object({ limit: z.coerce.number().int().min(1).max(1000).default(100) }).strict();
export const EgressAuditListSchema = z.object({ entries: z.array(EgressAuditEntrySchema) }).strict();

/** Control plane -> node: what the gateway needs for one session (values included; kept in memory only). */
export const SessionEgressConfigSchema = z
  .object({
    policy: EgressPolicySchema,
    secrets: z.array(z.object({ name: SecretNameSchema, placeholder: z.string(), value: z.string(), hosts: z.array(z.string()) }).strict()).max(256),
  })
  .strict();
export type SessionEgressConfig = z.infer<typeof SessionEgressConfigSchema>;
