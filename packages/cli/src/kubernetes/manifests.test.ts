import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { kubernetesManifests } from './manifests.js';
import { renderKubernetesYaml } from './render.js';
import { KubernetesValuesSchema, readKubernetesValues } from './values.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const valuesDir = path.join(root, 'deploy/kubernetes/values');
const examples = readdirSync(valuesDir).filter((f) => f.endsWith('.yaml'));
const cli = path.join(root, 'packages/cli/dist/main.js');

// biome-ignore lint/suspicious/noExplicitAny: rendered objects are walked as plain JSON
type Json = any;

function rendered(example: string): Json[] {
  const file = path.join(valuesDir, example);
  return kubernetesManifests(readKubernetesValues(file)).map((o) => o.toJSON());
}

const byKind = (objects: Json[], kind: string): Json[] => objects.filter((o) => o.kind === kind);

test('deploy/kubernetes/rendered holds what the example values render to now (render them again after a change)', () => {
  assert.deepEqual(examples.sort(), ['managed.yaml', 'minimal.yaml']);
  for (const example of examples) {
    const source = path.posix.join('deploy/kubernetes/values', example);
    const now = renderKubernetesYaml(readKubernetesValues(path.join(root, source)), source);
    const committed = readFileSync(path.join(root, 'deploy/kubernetes/rendered', example), 'utf8');
    assert.equal(
      committed,
      now,
      `deploy/kubernetes/rendered/${example} is stale: space kubernetes render --values ${source} --out deploy/kubernetes/rendered/${example}`,
    );
    const documents = parseAllDocuments(committed);
    assert.ok(documents.every((d) => d.errors.length === 0));
  }
});

test("every object of both examples passes Kubernetes' schemas, and the objects refer to one another rightly", () => {
  for (const example of examples) {
    const objects = rendered(example);
    const kinds = objects.map((o) => o.kind);
    for (const kind of ['Namespace', 'ServiceAccount', 'ConfigMap', 'Service', 'Deployment', 'PodDisruptionBudget', 'DaemonSet'])
      assert.ok(kinds.includes(kind), `${example}: a ${kind}`);
    const [deployment] = byKind(objects, 'Deployment');
    const [daemonSet] = byKind(objects, 'DaemonSet');
    const [service] = byKind(objects, 'Service');
    const [budget] = byKind(objects, 'PodDisruptionBudget');
    const podLabels = deployment.spec.template.metadata.labels;
    const matches = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
    assert.ok(matches(service.spec.selector, podLabels), 'the Service selects the control planes');
    assert.ok(matches(budget.spec.selector.matchLabels, podLabels), 'the budget counts the control planes');
    assert.ok(!matches(service.spec.selector, daemonSet.spec.template.metadata.labels), 'and not the nodes');

    const cp = deployment.spec.template.spec.containers[0];
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) assert.equal(cp[probe].httpGet.path, '/healthz', probe);
    assert.equal(cp.securityContext.runAsNonRoot, true);
    const node = daemonSet.spec.template.spec.containers[0];
    assert.deepEqual(node.lifecycle.preStop.exec.command, ['space', 'node', 'drain', '--self'], 'a stopping node pod drains itself');
    assert.equal(node.securityContext.privileged, true);
    assert.equal(daemonSet.spec.template.spec.hostNetwork, true);
    const nodeEnv = Object.fromEntries(node.env.map((e: Json) => [e.name, e]));
    assert.equal(nodeEnv.SPACE_NODE_UNDRAIN_AT_START.value, '1', 'and takes sessions again when it is back');
    assert.equal(nodeEnv.SPACE_NODE_ID.valueFrom.fieldRef.fieldPath, 'spec.nodeName');
    assert.match(
      nodeEnv.SPACE_CONTROL_PLANE_URL.value,
      new RegExp(`^http://${service.metadata.name}\\.${service.metadata.namespace}\\.svc:${service.spec.ports[0].port}$`),
    );

    const configMaps = new Set(byKind(objects, 'ConfigMap').map((c) => c.metadata.name));
    for (const container of [cp, node])
      for (const source of container.envFrom.filter((e: Json) => e.configMapRef))
        assert.ok(configMaps.has(source.configMapRef.name), `${container.name}: ConfigMap ${source.configMapRef.name} is rendered`);
    for (const autoscaler of byKind(objects, 'HorizontalPodAutoscaler')) {
      assert.equal(autoscaler.spec.scaleTargetRef.name, deployment.metadata.name);
      assert.equal(deployment.spec.replicas, undefined, 'replicas are the autoscaler’s to set');
      assert.ok(cp.resources.requests.cpu, 'CPU utilisation needs a CPU request');
    }
    for (const ingress of byKind(objects, 'Ingress'))
      for (const rule of ingress.spec.rules) assert.equal(rule.http.paths[0].backend.service.name, service.metadata.name);
  }
});

test('no key or password is ever in the manifests: every secret value comes from a Secret', () => {
  const secretSettings = ['SPACE_DATABASE_URL', 'SPACE_API_KEY', 'SPACE_NODE_JOIN_TOKEN', 'SPACE_NODE_TOKEN', 'AWS_SECRET_ACCESS_KEY'];
  for (const example of examples) {
    const text = readFileSync(path.join(root, 'deploy/kubernetes/rendered', example), 'utf8');
    for (const pattern of [/sk_[A-Za-z0-9]/, /snj_|snc_/, /PRIVATE KEY/, /[0-9a-f]{64}/, /postgres(ql)?:\/\//, /password/i, /AKIA[0-9A-Z]{16}/])
      assert.doesNotMatch(text, pattern, `${example}: ${pattern}`);
    for (const object of rendered(example))
      for (const kind of ['Deployment', 'DaemonSet'])
        if (object.kind === kind)
          for (const container of [...object.spec.template.spec.containers, ...(object.spec.template.spec.initContainers ?? [])])
            for (const variable of container.env ?? [])
              if (secretSettings.includes(variable.name)) assert.ok(variable.valueFrom?.secretKeyRef, `${kind} ${variable.name} from a Secret`);
    for (const configMap of byKind(rendered(example), 'ConfigMap'))
      for (const name of secretSettings) assert.ok(!(name in configMap.data), `${configMap.metadata.name} holds no ${name}`);
  }
});

test('bad values are refused before anything is rendered, each problem named with its path', () => {
  const refused = (values: unknown, message: RegExp) => {
    const parsed = KubernetesValuesSchema.safeParse(values);
    assert.ok(!parsed.success, `refused: ${JSON.stringify(values)}`);
    assert.match(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '), message);
  };
  const image = { registry: 'registry.example.com/space' };
  refused({}, /image: Required/);
  refused({ image, controlPlane: { settings: { SPACE_DATABASE_URL: 'postgres://u:p@db/space' } } }, /SPACE_DATABASE_URL cannot be set here: .*Secret/);
  refused({ image, controlPlane: { settings: { SPACE_CHECKPOINT_KEEPS: 5 } } }, /SPACE_CHECKPOINT_KEEPS is no setting of the control plane/);
  refused({ image, node: { settings: { SPACE_POOL_SIZE: 'many' } } }, /node\.settings\.SPACE_POOL_SIZE: SPACE_POOL_SIZE must be a whole number from 0/);
  refused({ image, node: { settings: { SPACE_CHECKPOINT_KEEP: 5 } } }, /no setting of the node agent/);
  refused({ image, controlPlane: { replica: 3 } }, /Unrecognized key\(s\) in object: 'replica'/);
  refused({ image, namespace: 'Space_Prod' }, /namespace: lower-case letters/);
  refused({ image, controlPlane: { ingress: { enabled: true } } }, /an enabled ingress needs a host/);
  refused({ image, controlPlane: { autoscaling: { minReplicas: 4, maxReplicas: 2 } } }, /maxReplicas is below minReplicas/);
  // What passes through to Kubernetes is checked against its schema when rendered.
  const values = KubernetesValuesSchema.parse({ image, node: { resources: { requests: { cpu: [1] } } } });
  assert.throws(() => kubernetesManifests(values), /DaemonSet space-node: .*resources\/requests\/cpu/);
  const tolerations = KubernetesValuesSchema.parse({ image, node: { tolerations: [{ key: 'a', tolerationSeconds: 'soon' }] } });
  assert.throws(() => kubernetesManifests(tolerations), /tolerations\/0\/tolerationSeconds must be integer/);
});

test('space kubernetes render and secrets: YAML or JSON from a values file; keys made once, kept, root only', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-kubernetes-'));
  try {
    const run = (...args: string[]) => spawnSync(process.execPath, [cli, 'kubernetes', ...args], { encoding: 'utf8' });
    const json = run('render', '--values', path.join(valuesDir, 'minimal.yaml'), '--json');
    assert.equal(json.status, 0, json.stderr);
    const list = JSON.parse(json.stdout);
    assert.equal(list.kind, 'List');
    assert.deepEqual(
      list.items.map((o: Json) => o.kind),
      rendered('minimal.yaml').map((o) => o.kind),
    );
    writeFileSync(path.join(dir, 'bad.yaml'), 'image: {registry: r.example.com/space}\ncontrolPlane: {replicas: 0}\n');
    const bad = run('render', '--values', path.join(dir, 'bad.yaml'));
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /bad\.yaml: controlPlane\.replicas: Number must be greater than or equal to 1/);
    assert.equal(bad.stdout, '');

    const keys = path.join(dir, 'keys');
    const first = run('secrets', '--dir', keys, '--namespace', 'space-prod', '--json');
    assert.equal(first.status, 0, first.stderr);
    const { commands } = JSON.parse(first.stdout);
    assert.ok(commands.some((c: string) => c.includes('--namespace space-prod create secret generic space-cluster-ca')));
    const files = ['admin-key', 'secrets-key', 'cluster-ca/ca.key', 'cluster-ca/ca.crt', 'gateway-ca/ca.key', 'gateway-ca/ca.crt'];
    const before = files.map((f) => readFileSync(path.join(keys, f), 'utf8'));
    for (const f of ['admin-key', 'secrets-key', 'cluster-ca/ca.key', 'gateway-ca/ca.key'])
      assert.equal(statSync(path.join(keys, f)).mode & 0o077, 0, `${f} is root's only`);
    assert.match(before[1]!, /^[0-9a-f]{64}\n$/, 'the secrets key is what SPACE_SECRETS_KEY_FILE takes');
    assert.equal(run('secrets', '--dir', keys).status, 0);
    assert.deepEqual(
      files.map((f) => readFileSync(path.join(keys, f), 'utf8')),
      before,
      'made once: running it again keeps them',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
