import { readFileSync } from 'node:fs';
import { controlPlaneSettings } from '@space/control-plane';
import { nodeSettings } from '@space/node';
import { type SettingTable, readSettings, sharedSettings } from '@space/server-kit';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { imageDataDir } from '../images/image-recipes.js';

/** A Kubernetes name (RFC 1123 label): what namespaces, Secrets and ConfigMaps are called. */
const name = z
  .string()
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'lower-case letters, digits and "-", starting and ending with a letter or digit');
const labels = z.record(z.string(), z.string());
/** Passed through as Kubernetes takes them (checked against its schemas when rendered). */
const passThrough = z.record(z.string(), z.unknown());

/**
 * Settings the manifests set themselves, from the pod, the Secrets or the `objectStore` values: a
 * value for one of them is refused with where it belongs (a key or password never goes in values).
 */
const setByManifests: Record<string, string> = {
  SPACE_DATA_DIR: `the data directory is fixed in the image (${imageDataDir})`,
  SPACE_HOST: 'set by the manifests',
  SPACE_PORT: 'set by controlPlane.port',
  SPACE_API_KEY: 'the admin key is read from the Secret (key admin-key)',
  SPACE_NODE_TOKEN: "nodes make their own node API token; control planes get it in the node's heartbeat",
  SPACE_DATABASE_URL: 'the database URL is read from the Secret (key database-url)',
  SPACE_SECRETS_KEY_FILE: 'the secrets key is mounted from the Secret (key secrets-key)',
  SPACE_CLUSTER_CA_DIR: 'the cluster CA is mounted from its Secret (secrets.clusterCa)',
  SPACE_PREVIEW_DOMAIN: 'set by controlPlane.ingress.previewDomain',
  SPACE_OBJECT_STORE: 'set by objectStore.url',
  SPACE_S3_ENDPOINT: 'set by objectStore.endpoint',
  SPACE_S3_REGION: 'set by objectStore.region',
  SPACE_S3_FORCE_PATH_STYLE: 'set by objectStore.forcePathStyle',
  SPACE_S3_CA_FILE: 'not taken yet: a private CA for the object store is not mounted by these manifests',
  SPACE_NODE_HOST: "the node API listens on the host's address",
  SPACE_NODE_PORT: 'set by node.port',
  SPACE_NODE_ID: 'a node is named after its Kubernetes node (spec.nodeName)',
  SPACE_NODE_ADVERTISE_URL: "built from the host's address and node.port",
  SPACE_CONTROL_PLANE_URL: "the control planes' Service",
  SPACE_NODE_JOIN_TOKEN: 'the join token is read from the Secret (key node-join-token)',
  SPACE_GATEWAY_CA_DIR: 'the gateway CA is copied from its Secret (secrets.gatewayCa)',
  SPACE_NODE_UNDRAIN_AT_START: 'set by the manifests: a node pod undrains itself once registered (its preStop hook drained it)',
};

/** `settings` of one kind of process: SPACE_* names its table knows, with values it accepts. */
function settingsOf(table: SettingTable, process: string) {
  const known = new Map(Object.values(table).map((s) => [s.name, s]));
  return z
    .record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String))
    .default({})
    .superRefine((settings, ctx) => {
      for (const [key, value] of Object.entries(settings)) {
        const setting = known.get(key);
        const problem =
          key in setByManifests
            ? `${key} cannot be set here: ${setByManifests[key]}`
            : !setting
              ? `${key} is no setting of the ${process} (docs/configuration.md)`
              : setting.testOnly
                ? `${key} is for tests only`
                : null;
        if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, path: [key], message: problem });
        else
          try {
            readSettings({ one: setting! }, { [key]: value });
          } catch (err) {
            ctx.addIssue({ code: z.ZodIssueCode.custom, path: [key], message: (err as Error).message });
          }
      }
    });
}

const resources = passThrough.default({});

/** The Secrets the manifests refer to unless the values name others (`space kubernetes secrets` prints commands for these). */
export const defaultSecretNames = { name: 'space', clusterCa: 'space-cluster-ca', gatewayCa: 'space-gateway-ca' };

/**
 * What `space kubernetes render` takes (YAML or JSON): everything has a default but the images'
 * registry, which names where `./space image build`'s images were pushed. Secrets are referred to
 * by name, never carried: docs/kubernetes.md says what each holds and how to make it.
 */
export const KubernetesValuesSchema = z
  .object({
    namespace: name.default('space'),
    image: z
      .object({
        /** Where the images were pushed: `<registry>/space-control-plane:<tag>`, `<registry>/space-node:<tag>`. */
        registry: z
          .string()
          .min(1)
          .regex(/^[^\s:]+(:\d+)?(\/[^\s:]+)*$/, 'a registry and path, such as registry.example.com/space'),
        tag: z
          .string()
          .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/)
          .default('latest'),
        pullPolicy: z.enum(['IfNotPresent', 'Always', 'Never']).default('IfNotPresent'),
        pullSecrets: z.array(name).default([]),
      })
      .strict(),
    secrets: z
      .object({
        /** Keys: database-url, admin-key, secrets-key, node-join-token. */
        name: name.default(defaultSecretNames.name),
        /** ca.crt and ca.key of the cluster CA (`space cluster ca init`). */
        clusterCa: name.default(defaultSecretNames.clusterCa),
        /** ca.crt and ca.key of the gateway CA every node shares. */
        gatewayCa: name.default(defaultSecretNames.gatewayCa),
      })
      .strict()
      .default({}),
    objectStore: z
      .object({
        url: z.string().regex(/^(s3:\/\/[^/\s]+(\/\S*)?|file:\/\/\/\S+)$/, 's3://bucket/prefix, or file:///dir on storage every node mounts'),
        endpoint: z
          .string()
          .regex(/^https?:\/\/\S+$/)
          .optional(),
        region: z.string().min(1).optional(),
        forcePathStyle: z.boolean().default(false),
        /** A Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; none for a role the pods are given (IRSA, workload identity). */
        credentialsSecret: name.optional(),
      })
      .strict()
      .optional(),
    controlPlane: z
      .object({
        replicas: z.number().int().min(1).max(100).default(2),
        port: z.number().int().min(1).max(65535).default(7070),
        resources,
        autoscaling: z
          .object({
            enabled: z.boolean().default(true),
            minReplicas: z.number().int().min(1).default(2),
            maxReplicas: z.number().int().min(1).default(8),
            cpuPercent: z.number().int().min(1).max(100).default(70),
          })
          .strict()
          .refine((a) => a.maxReplicas >= a.minReplicas, 'maxReplicas is below minReplicas')
          .default({}),
        /** Control planes kept up through voluntary disruptions (node upgrades, evictions). */
        minAvailable: z.number().int().min(0).default(1),
        ingress: z
          .object({
            enabled: z.boolean().default(false),
            className: z.string().min(1).optional(),
            host: z
              .string()
              .regex(/^[a-z0-9.-]+$/)
              .optional(),
            /** Preview URLs' wildcard domain (`*.<previewDomain>` routed here too); SPACE_PREVIEW_DOMAIN. */
            previewDomain: z
              .string()
              .regex(/^[a-z0-9.-]+$/)
              .optional(),
            /** A Secret of type kubernetes.io/tls for the host (and the wildcard). */
            tlsSecret: name.optional(),
            annotations: labels.default({}),
          })
          .strict()
          .refine((i) => !i.enabled || i.host, 'an enabled ingress needs a host')
          .default({}),
        settings: settingsOf({ ...sharedSettings, ...controlPlaneSettings }, 'control plane'),
      })
      .strict()
      .default({}),
    node: z
      .object({
        port: z.number().int().min(1).max(65535).default(7071),
        /** Where each sandbox host keeps its btrfs image, templates and checkpoints (a hostPath: it outlives the pod). */
        dataDir: z
          .string()
          .regex(/^\/\S+$/)
          .default(imageDataDir),
        /** The hosts that run sandboxes: label them (`kubectl label node … space.dev/sandbox-host=true`). */
        nodeSelector: labels.default({ 'space.dev/sandbox-host': 'true' }),
        tolerations: z.array(passThrough).default([]),
        resources,
        /** How long a stopping node pod may take to move its sessions off (its preStop drain). */
        drainGraceSec: z.number().int().min(30).max(86_400).default(900),
        settings: settingsOf({ ...sharedSettings, ...nodeSettings }, 'node agent'),
      })
      .strict()
      .default({}),
  })
  .strict();
export type KubernetesValues = z.infer<typeof KubernetesValuesSchema>;

/** Reads values from a YAML or JSON file, every problem named with its path. */
export function readKubernetesValues(file: string): KubernetesValues {
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
  const parsed = KubernetesValuesSchema.safeParse(raw ?? {});
  if (!parsed.success) throw new Error(`${file}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(top)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}
