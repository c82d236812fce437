import { createHash } from 'node:crypto';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IEnvFromSource } from 'kubernetes-models/v1/EnvFromSource';
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import type { IResourceRequirements } from 'kubernetes-models/v1/ResourceRequirements';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import type { IToleration } from 'kubernetes-models/v1/Toleration';
import type { KubernetesValues } from './values.js';

/** Where things are inside both images (`./space image build`). */
const dataDir = '/var/lib/space';
const secretsDir = '/etc/space/secrets';
const clusterCaDir = '/etc/space/cluster-ca';
const gatewayCaSecretDir = '/etc/space/gateway-ca';
/** The control plane's user in its image: it needs no root. */
const controlPlaneUid = 10001;
/** Secret files readable by the pod's group (fsGroup) only. */
const secretFileMode = 0o440;

const defaultResources = {
  controlPlane: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } },
  // No memory limit: the node's sandboxes are its children, and each is bounded by its own limits.
  node: { requests: { cpu: '250m', memory: '512Mi' } },
};

type Component = 'control-plane' | 'node';

/** One rendered object: what `kubectl apply` takes, checked against Kubernetes' schema. */
export interface Manifest {
  kind: string;
  metadata?: { name?: string };
  validate(): void;
  toJSON(): unknown;
}

/**
 * SPACE's Kubernetes objects for `values`, in the order `kubectl apply` should meet them: the
 * control planes (Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler, Ingress) and
 * the node agents (a DaemonSet on the sandbox hosts), their settings in ConfigMaps, their keys in
 * Secrets made apart (never carried here). Each object is checked against Kubernetes' schemas.
 */
export function kubernetesManifests(values: KubernetesValues): Manifest[] {
  const cp = values.controlPlane;
  const namespace = values.namespace;
  const names = { controlPlane: 'space-control-plane', node: 'space-node' };
  const labels = (component: Component) => ({
    'app.kubernetes.io/name': 'space',
    'app.kubernetes.io/component': component,
  });
  const metadata = (name: string, component?: Component) => ({
    name,
    namespace,
    labels: { 'app.kubernetes.io/part-of': 'space', 'app.kubernetes.io/version': values.image.tag, ...(component ? labels(component) : {}) },
  });
  const image = (component: Component) => `${values.image.registry}/space-${component}:${values.image.tag}`;
  const secret = (key: string, optional = false): IEnvVar['valueFrom'] => ({
    secretKeyRef: { name: values.secrets.name, key, ...(optional ? { optional } : {}) },
  });
  const objectStoreEnv = values.objectStore
    ? {
        SPACE_OBJECT_STORE: values.objectStore.url,
        ...(values.objectStore.endpoint ? { SPACE_S3_ENDPOINT: values.objectStore.endpoint } : {}),
        ...(values.objectStore.region ? { SPACE_S3_REGION: values.objectStore.region } : {}),
        ...(values.objectStore.forcePathStyle ? { SPACE_S3_FORCE_PATH_STYLE: '1' } : {}),
      }
    : {};
  const envFrom = (settings: string): IEnvFromSource[] => [
    { configMapRef: { name: settings } },
    ...(values.objectStore?.credentialsSecret ? [{ secretRef: { name: values.objectStore.credentialsSecret } }] : []),
  ];
  const pullSecrets = values.image.pullSecrets.map((name) => ({ name }));

  const cpSettings = new ConfigMap({
    metadata: metadata(`${names.controlPlane}-settings`, 'control-plane'),
    data: sorted({
      ...cp.settings,
      ...objectStoreEnv,
      ...(cp.ingress.previewDomain ? { SPACE_PREVIEW_DOMAIN: cp.ingress.previewDomain } : {}),
    }),
  });
  const nodeSettings = new ConfigMap({ metadata: metadata(`${names.node}-settings`, 'node'), data: sorted({ ...values.node.settings, ...objectStoreEnv }) });

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
    envFrom: envFrom(cpSettings.metadata!.name!),
    resources: resourcesOr(cp.resources, defaultResources.controlPlane),
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
  const controlPlane = new Deployment({
    metadata: metadata(names.controlPlane, 'control-plane'),
    spec: {
      // With an autoscaler the replicas are its to set: `kubectl apply` would reset them otherwise.
      ...(cp.autoscaling.enabled ? {} : { replicas: cp.replicas }),
      selector: { matchLabels: labels('control-plane') },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: { labels: labels('control-plane'), annotations: { 'space.dev/settings-sha256': digest(cpSettings.data) } },
        spec: {
          serviceAccountName: names.controlPlane,
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
    metadata: metadata(names.controlPlane, 'control-plane'),
    spec: { selector: labels('control-plane'), ports: [{ name: 'http', port: cp.port, targetPort: 'http' }] },
  });
  const disruptionBudget = new PodDisruptionBudget({
    metadata: metadata(names.controlPlane, 'control-plane'),
    spec: { minAvailable: cp.minAvailable, selector: { matchLabels: labels('control-plane') } },
  });
  const autoscaler = cp.autoscaling.enabled
    ? new HorizontalPodAutoscaler({
        metadata: metadata(names.controlPlane, 'control-plane'),
        spec: {
          scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: names.controlPlane },
          minReplicas: cp.autoscaling.minReplicas,
          maxReplicas: cp.autoscaling.maxReplicas,
          metrics: [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: cp.autoscaling.cpuPercent } } }],
        },
      })
    : null;
  const ingress = cp.ingress.enabled ? controlPlaneIngress(values, metadata(names.controlPlane, 'control-plane'), names.controlPlane) : null;

  const nodeContainer: IContainer = {
    name: 'node',
    image: image('node'),
    imagePullPolicy: values.image.pullPolicy,
    command: ['space', 'node'],
    ports: [{ name: 'node-api', containerPort: values.node.port }],
    env: [
      { name: 'SPACE_DATA_DIR', value: dataDir },
      { name: 'SPACE_NODE_ID', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      { name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } },
      { name: 'SPACE_NODE_HOST', value: '$(HOST_IP)' },
      { name: 'SPACE_NODE_PORT', value: String(values.node.port) },
      // Served over HTTPS once joined: the cluster CA issues the node API's certificate for this address.
      { name: 'SPACE_NODE_ADVERTISE_URL', value: `https://$(HOST_IP):${values.node.port}` },
      { name: 'SPACE_CONTROL_PLANE_URL', value: `http://${names.controlPlane}.${namespace}.svc:${cp.port}` },
      // Only the first start of a node joins with it; later starts use the credential kept on the host.
      { name: 'SPACE_NODE_JOIN_TOKEN', valueFrom: secret('node-join-token', true) },
      { name: 'SPACE_NODE_UNDRAIN_AT_START', value: '1' },
    ],
    envFrom: envFrom(nodeSettings.metadata!.name!),
    resources: resourcesOr(values.node.resources, defaultResources.node),
    readinessProbe: { tcpSocket: { port: 'node-api' }, periodSeconds: 10 },
    // Sandboxes need what gVisor, btrfs loop devices, network namespaces and cgroups need.
    securityContext: { privileged: true },
    // A node pod that stops moves its sessions to other nodes first (full checkpoints, processes along).
    lifecycle: { preStop: { exec: { command: ['space', 'node', 'drain', '--self'] } } },
    volumeMounts: [
      { name: 'data', mountPath: dataDir },
      // Loop devices made after the pod started (each node's btrfs image is one) appear here only.
      { name: 'dev', mountPath: '/dev' },
    ],
  };
  // The gateway CA (the same on every node, so a session moved to another node keeps trusting its
  // gateway) is copied from its Secret into the data directory, where the gateway keeps its files.
  const gatewayCaCopy: IContainer = {
    name: 'gateway-ca',
    image: image('node'),
    imagePullPolicy: values.image.pullPolicy,
    command: [
      'sh',
      '-c',
      `install -d -m 700 ${dataDir}/gateway-ca && install -m 600 ${gatewayCaSecretDir}/ca.crt ${gatewayCaSecretDir}/ca.key ${dataDir}/gateway-ca/`,
    ],
    volumeMounts: [
      { name: 'data', mountPath: dataDir },
      { name: 'gateway-ca', mountPath: gatewayCaSecretDir, readOnly: true },
    ],
  };
  const nodes = new DaemonSet({
    metadata: metadata(names.node, 'node'),
    spec: {
      selector: { matchLabels: labels('node') },
      // One host at a time: each stopping pod drains its sessions onto the others.
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels: labels('node'), annotations: { 'space.dev/settings-sha256': digest(nodeSettings.data) } },
        spec: {
          serviceAccountName: names.node,
          automountServiceAccountToken: false,
          imagePullSecrets: pullSecrets,
          hostNetwork: true,
          dnsPolicy: 'ClusterFirstWithHostNet',
          nodeSelector: values.node.nodeSelector,
          tolerations: values.node.tolerations as IToleration[],
          terminationGracePeriodSeconds: values.node.drainGraceSec,
          initContainers: [gatewayCaCopy],
          containers: [nodeContainer],
          volumes: [
            { name: 'data', hostPath: { path: values.node.dataDir, type: 'DirectoryOrCreate' } },
            { name: 'dev', hostPath: { path: '/dev', type: 'Directory' } },
            { name: 'gateway-ca', secret: { secretName: values.secrets.gatewayCa, defaultMode: 0o400 } },
          ],
        },
      },
    },
  });

  const objects: (Manifest | null)[] = [
    new Namespace({ metadata: { name: namespace, labels: { 'app.kubernetes.io/part-of': 'space' } } }),
    new ServiceAccount({ metadata: metadata(names.controlPlane, 'control-plane'), automountServiceAccountToken: false }),
    new ServiceAccount({ metadata: metadata(names.node, 'node'), automountServiceAccountToken: false }),
    cpSettings,
    nodeSettings,
    service,
    controlPlane,
    disruptionBudget,
    autoscaler,
    ingress,
    nodes,
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

function resourcesOr(given: Record<string, unknown>, fallback: IResourceRequirements): IResourceRequirements {
  return Object.keys(given).length > 0 ? (given as IResourceRequirements) : fallback;
}

function sorted(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}

/** A pod template annotation that changes with its settings, so a changed ConfigMap rolls the pods. */
function digest(data: Record<string, string> | undefined): string {
  return createHash('sha256')
    .update(JSON.stringify(data ?? {}))
    .digest('hex')
    .slice(0, 16);
}
