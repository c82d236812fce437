import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IToleration } from 'kubernetes-models/v1/Toleration';
import { type ManifestParts, dataDir, objectName, resourcesOr, settingsDigest } from './manifest-parts.js';
import type { KubernetesValues } from './values.js';

const gatewayCaSecretDir = '/etc/space/gateway-ca';
// No memory limit: the node's sandboxes are its children, and each is bounded by its own limits.
const defaultResources = { requests: { cpu: '250m', memory: '512Mi' } };

/**
 * The node agents: a privileged DaemonSet on the sandbox hosts (host network, the host's /dev, a
 * hostPath data directory) whose pods drain themselves as they stop, its ServiceAccount and settings.
 */
export function nodeManifests(values: KubernetesValues, parts: ManifestParts) {
  const name = objectName('node');
  const { labels, metadata, image, secret, envFrom, pullSecrets } = parts;
  const settings = parts.settings('node', values.node.settings);
  const controlPlanes = `http://${objectName('control-plane')}.${values.namespace}.svc:${values.controlPlane.port}`;
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
      { name: 'SPACE_CONTROL_PLANE_URL', value: controlPlanes },
      // Only the first start of a node joins with it; later starts use the credential kept on the host.
      { name: 'SPACE_NODE_JOIN_TOKEN', valueFrom: secret('node-join-token', true) },
      { name: 'SPACE_NODE_UNDRAIN_AT_START', value: '1' },
    ],
    envFrom: envFrom(settings),
    resources: resourcesOr(values.node.resources, defaultResources),
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
  const daemonSet = new DaemonSet({
    metadata: metadata(name, 'node'),
    spec: {
      selector: { matchLabels: labels('node') },
      // One host at a time: each stopping pod drains its sessions onto the others.
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels: labels('node'), annotations: { 'space.dev/settings-sha256': settingsDigest(settings) } },
        spec: {
          serviceAccountName: name,
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
  return { serviceAccount: parts.serviceAccount('node'), settings, daemonSet };
}
