import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { Service } from 'kubernetes-models/v1/Service';
import { controlPlaneUid } from '../images/image-recipes.js';
import { type ManifestParts, dataDir, objectName, resourcesOr, settingsDigest } from './manifest-parts.js';
import type { KubernetesValues } from './values.js';

const secretsDir = '/etc/space/secrets';
const clusterCaDir = '/etc/space/cluster-ca';
/** Secret files readable by the pod's group (fsGroup) only. */
const secretFileMode = 0o440;
const defaultResources = { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } };

/**
 * The control planes: a Deployment running `space control-plane` as the image's user on a read-only
 * root, its Service, PodDisruptionBudget, HorizontalPodAutoscaler and Ingress (when asked for), its
 * ServiceAccount and settings.
 */
export function controlPlaneManifests(values: KubernetesValues, parts: ManifestParts) {
  const cp = values.controlPlane;
  const name = objectName('control-plane');
  const { labels, metadata, image, secret, envFrom, pullSecrets } = parts;
  const settings = parts.settings('control-plane', {
    ...cp.settings,
    ...(cp.ingress.previewDomain ? { SPACE_PREVIEW_DOMAIN: cp.ingress.previewDomain } : {}),
  });
  const controlPlaneContainer: IContainer = {
    name: 'control-plane',
    image: image('control-plane'),
    imagePullPolicy: values.image.pullPolicy,
    command: ['space', 'control-plane'],
    ports: [{ name: 'http', containerPort: cp.port }],
    env: [
      { name: 'SPACE_HOST', value: '0.0.0.0' },
      { name: 'SPACE_PORT', value: String(cp.port) },
      { name: 'SPACE_DATA_DIR', value: dataDir },
      { name: 'SPACE_DATABASE_URL', valueFrom: secret('database-url') },
      { name: 'SPACE_API_KEY', valueFrom: secret('admin-key') },
      { name: 'SPACE_SECRETS_KEY_FILE', value: `${secretsDir}/secrets-key` },
      { name: 'SPACE_CLUSTER_CA_DIR', value: clusterCaDir },
    ],
    envFrom: envFrom(settings),
    resources: resourcesOr(cp.resources, defaultResources),
    // Schema migrations run at start, under the database's advisory lock: a first start may take a while.
    startupProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 5, failureThreshold: 60 },
    readinessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 5, failureThreshold: 2 },
    livenessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 6 },
    securityContext: {
      runAsNonRoot: true,
      runAsUser: controlPlaneUid,
      runAsGroup: controlPlaneUid,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    },
    volumeMounts: [
      { name: 'data', mountPath: dataDir },
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'secrets-key', mountPath: secretsDir, readOnly: true },
      { name: 'cluster-ca', mountPath: clusterCaDir, readOnly: true },
    ],
  };
  const deployment = new Deployment({
    metadata: metadata(name, 'control-plane'),
    spec: {
      // With an autoscaler the replicas are its to set: `kubectl apply` would reset them otherwise.
      ...(cp.autoscaling.enabled ? {} : { replicas: cp.replicas }),
      selector: { matchLabels: labels('control-plane') },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: { labels: labels('control-plane'), annotations: { 'space.dev/settings-sha256': settingsDigest(settings) } },
        spec: {
          serviceAccountName: name,
          automountServiceAccountToken: false,
          imagePullSecrets: pullSecrets,
          securityContext: { fsGroup: controlPlaneUid, seccompProfile: { type: 'RuntimeDefault' } },
          terminationGracePeriodSeconds: 60,
          topologySpreadConstraints: [
            { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: labels('control-plane') } },
          ],
          containers: [controlPlaneContainer],
          volumes: [
            { name: 'data', emptyDir: {} },
            { name: 'tmp', emptyDir: {} },
            {
              name: 'secrets-key',
              secret: { secretName: values.secrets.name, items: [{ key: 'secrets-key', path: 'secrets-key' }], defaultMode: secretFileMode },
            },
            { name: 'cluster-ca', secret: { secretName: values.secrets.clusterCa, defaultMode: secretFileMode } },
          ],
        },
      },
    },
  });
  const service = new Service({
    metadata: metadata(name, 'control-plane'),
    spec: { selector: labels('control-plane'), ports: [{ name: 'http', port: cp.port, targetPort: 'http' }] },
  });
  const disruptionBudget = new PodDisruptionBudget({
    metadata: metadata(name, 'control-plane'),
    spec: { minAvailable: cp.minAvailable, selector: { matchLabels: labels('control-plane') } },
  });
  const autoscaler = cp.autoscaling.enabled
    ? new HorizontalPodAutoscaler({
        metadata: metadata(name, 'control-plane'),
        spec: {
          scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name },
          minReplicas: cp.autoscaling.minReplicas,
          maxReplicas: cp.autoscaling.maxReplicas,
          metrics: [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: cp.autoscaling.cpuPercent } } }],
        },
      })
    : null;
  const ingress = cp.ingress.enabled ? controlPlaneIngress(values, metadata(name, 'control-plane'), name) : null;
  return { serviceAccount: parts.serviceAccount('control-plane'), settings, service, deployment, disruptionBudget, autoscaler, ingress };
}

/** The API's host and the previews' wildcard, both to the control planes' Service (WebSockets included). */
function controlPlaneIngress(
  values: KubernetesValues,
  metadata: { name: string; namespace: string; labels: Record<string, string> },
  service: string,
): Ingress {
  const { ingress } = values.controlPlane;
  const hosts = [ingress.host!, ...(ingress.previewDomain ? [`*.${ingress.previewDomain}`] : [])];
  const backend = { service: { name: service, port: { name: 'http' } } };
  return new Ingress({
    metadata: { ...metadata, annotations: ingress.annotations },
    spec: {
      ...(ingress.className ? { ingressClassName: ingress.className } : {}),
      ...(ingress.tlsSecret ? { tls: [{ hosts, secretName: ingress.tlsSecret }] } : {}),
      rules: hosts.map((host) => ({ host, http: { paths: [{ path: '/', pathType: 'Prefix', backend }] } })),
    },
  });
}
