import { createHash } from 'node:crypto';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IEnvFromSource } from 'kubernetes-models/v1/EnvFromSource';
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar';
import type { IResourceRequirements } from 'kubernetes-models/v1/ResourceRequirements';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { imageDataDir } from '../images/image-recipes.js';
import type { KubernetesValues } from './values.js';

/** Where things are inside both images (`./space image build`): the data directory is the image's. */
export const dataDir = imageDataDir;

export type Component = 'control-plane' | 'node';

/** One rendered object: what `kubectl apply` takes, checked against Kubernetes' schema. */
export interface Manifest {
  kind: string;
  metadata?: { name?: string };
  validate(): void;
  toJSON(): unknown;
}

/** The name of a component's objects (its Deployment or DaemonSet, Service, ServiceAccount). */
export function objectName(component: Component): string {
  return `space-${component}`;
}

/** What the control planes' and the nodes' objects are made of alike, for one values file. */
export function manifestParts(values: KubernetesValues) {
  const labels = (component: Component) => ({
    'app.kubernetes.io/name': 'space',
    'app.kubernetes.io/component': component,
  });
  const metadata = (name: string, component?: Component) => ({
    name,
    namespace: values.namespace,
    labels: { 'app.kubernetes.io/part-of': 'space', 'app.kubernetes.io/version': values.image.tag, ...(component ? labels(component) : {}) },
  });
  const objectStoreEnv = values.objectStore
    ? {
        SPACE_OBJECT_STORE: values.objectStore.url,
        ...(values.objectStore.endpoint ? { SPACE_S3_ENDPOINT: values.objectStore.endpoint } : {}),
        ...(values.objectStore.region ? { SPACE_S3_REGION: values.objectStore.region } : {}),
        ...(values.objectStore.forcePathStyle ? { SPACE_S3_FORCE_PATH_STYLE: '1' } : {}),
      }
    : {};
  return {
    labels,
    metadata,
    image: (component: Component) => `${values.image.registry}/space-${component}:${values.image.tag}`,
    secret: (key: string, optional = false): IEnvVar['valueFrom'] => ({
      secretKeyRef: { name: values.secrets.name, key, ...(optional ? { optional } : {}) },
    }),
    envFrom: (settings: ConfigMap): IEnvFromSource[] => [
      { configMapRef: { name: settings.metadata!.name! } },
      ...(values.objectStore?.credentialsSecret ? [{ secretRef: { name: values.objectStore.credentialsSecret } }] : []),
    ],
    pullSecrets: values.image.pullSecrets.map((name) => ({ name })),
    serviceAccount: (component: Component) => new ServiceAccount({ metadata: metadata(objectName(component), component), automountServiceAccountToken: false }),
    /** A component's settings (the object store's with them), in the ConfigMap its pods take their environment from. */
    settings: (component: Component, settings: Record<string, string>) =>
      new ConfigMap({ metadata: metadata(`${objectName(component)}-settings`, component), data: sorted({ ...settings, ...objectStoreEnv }) }),
  };
}
export type ManifestParts = ReturnType<typeof manifestParts>;

export function resourcesOr(given: Record<string, unknown>, fallback: IResourceRequirements): IResourceRequirements {
  return Object.keys(given).length > 0 ? (given as IResourceRequirements) : fallback;
}

function sorted(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}

/** A pod template annotation that changes with its settings, so a changed ConfigMap rolls the pods. */
export function settingsDigest(settings: ConfigMap): string {
  return createHash('sha256')
    .update(JSON.stringify(settings.data ?? {}))
    .digest('hex')
    .slice(0, 16);
}
