import { stringify } from 'yaml';
import { kubernetesManifests } from './manifests.js';
import type { KubernetesValues } from './values.js';

/**
 * The manifests for `values` as one YAML stream (`kubectl apply -f`), headed by how to make it
 * again; `source` names the values file in that header.
 */
export function renderKubernetesYaml(values: KubernetesValues, source: string): string {
  const header = [
    `# SPACE on Kubernetes, rendered by "space kubernetes render --values ${source}".`,
    '# Do not edit: change the values and render again (docs/kubernetes.md). No key or credential is',
    '# here: the Secrets named below are made apart ("space kubernetes secrets").',
  ].join('\n');
  const documents = kubernetesManifests(values).map((object) => stringify(object.toJSON(), { lineWidth: 0, sortMapEntries: false }).trimEnd());
  return `${header}\n---\n${documents.join('\n---\n')}\n`;
}

/** The same objects as one Kubernetes `List` (`--json`). */
export function renderKubernetesJson(values: KubernetesValues): string {
  return `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: kubernetesManifests(values).map((o) => o.toJSON()) }, null, 2)}\n`;
}
