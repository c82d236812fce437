import { Namespace } from 'kubernetes-models/v1/Namespace';
import { controlPlaneManifests } from './control-plane-manifests.js';
import { type Manifest, manifestParts } from './manifest-parts.js';
import { nodeManifests } from './node-manifests.js';
import type { KubernetesValues } from './values.js';

export type { Manifest } from './manifest-parts.js';

/**
 * SPACE's Kubernetes objects for `values`, in the order `kubectl apply` should meet them: the
 * control planes (Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler, Ingress) and
 * the node agents (a DaemonSet on the sandbox hosts), their settings in ConfigMaps, their keys in
 * Secrets made apart (never carried here). Each object is checked against Kubernetes' schemas.
 */
export function kubernetesManifests(values: KubernetesValues): Manifest[] {
  const parts = manifestParts(values);
  const cp = controlPlaneManifests(values, parts);
  const node = nodeManifests(values, parts);
  const objects: (Manifest | null)[] = [
    new Namespace({ metadata: { name: values.namespace, labels: { 'app.kubernetes.io/part-of': 'space' } } }),
    cp.serviceAccount,
    node.serviceAccount,
    cp.settings,
    node.settings,
    cp.service,
    cp.deployment,
    cp.disruptionBudget,
    cp.autoscaler,
    cp.ingress,
    node.daemonSet,
  ];
  const present = objects.filter((o): o is Manifest => o !== null);
  for (const object of present)
    try {
      object.validate();
    } catch (err) {
      throw new Error(`${object.kind} ${object.metadata?.name}: ${(err as Error).message}`);
    }
  return present;
}
