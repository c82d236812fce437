import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { type LocalPostgres, startLocalPostgres } from '@space/control-plane';
import { freePort } from '@space/server-kit';
import { Api } from './client.js';
import { type Container, editSpec, execInContainer, hostNetwork, privileged, runContainer, unpackBundle } from './harness/oci-container.js';
import { hostResources } from './host-state.js';
import { cliMain, repoRoot, testDataDir } from './platform.js';

// `./space image build`'s images, run as a cluster would run them: each image's root filesystem
// under a real OCI runtime (crun), the control plane's against a real PostgreSQL, the node's with a
// real gVisor sandbox inside.
interface BuiltImage {
  reference: string;
  layout: string;
  archive: string;
  layers: { digest: string; bytes: number }[];
  archiveBytes: number;
}

const work = mkdtempSync('/var/tmp/space-images-test-');
const adminKey = `images-test-${process.pid}-${Date.now()}`;
const nodeData = path.join(work, 'node-data');
const nodeContainer = `space-test-node-${process.pid}`;
let images: Record<'control-plane' | 'node', BuiltImage & { tag: string }>;
let postgres: LocalPostgres | null = null;
let controlPlane: Container | null = null;
let node: Container | null = null;
let api: Api;
let cpPort: number;
let joinToken: string;

before(async () => {
  // The images' Debian systems and npm dependencies are cached in the test data directory: a
  // first build on a new machine takes a few minutes, later ones seconds.
  const build = spawnSync(process.execPath, [cliMain, 'image', 'build', '--out', path.join(work, 'images'), '--json'], {
    encoding: 'utf8',
    env: { ...process.env, SPACE_DATA_DIR: testDataDir },
    timeout: 15 * 60_000,
  });
  assert.equal(build.status, 0, build.stderr.slice(-4000));
  const built = (JSON.parse(build.stdout) as { images: BuiltImage[] }).images;
  images = Object.fromEntries(
    built.map((b) => [b.reference.split(':')[0]!.replace(/^space-/, ''), { ...b, tag: b.reference.split(':')[1]! }]),
  ) as typeof images;
  postgres = await startLocalPostgres();
});

after(async () => {
  await node?.stop();
  await controlPlane?.stop();
  await postgres?.stop();
  const left = hostResources(nodeData);
  rmSync(work, { recursive: true, force: true });
  assert.deepEqual({ ...left, staged: [] }, { runsc: [], netns: [], mounts: [], loops: [], staged: [] }, 'the node container left nothing on the host');
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const revision = execFileSync('git', ['-C', repoRoot, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();

test('image build makes both images as OCI layouts and docker save archives, tagged and labelled with the commit, with no key in them', () => {
  for (const [name, image] of Object.entries(images)) {
    assert.match(image.tag, new RegExp(`^\\d+\\.\\d+\\.\\d+-${revision.slice(0, 12)}(-dirty)?$`), name);
    const inspected = JSON.parse(execFileSync('skopeo', ['inspect', `oci:${image.layout}:${image.tag}`], { encoding: 'utf8' }));
    assert.equal(inspected.Labels['org.opencontainers.image.revision'], revision);
    assert.equal(inspected.Layers.length, 2, 'the Debian system, then SPACE');
    assert.ok(image.layers.every((l) => l.bytes > 1_000_000));
    // What `docker load` reads: manifest.json naming the image (docker.io/library/: Docker's spelling of a bare name), its config and layers.
    const manifest = JSON.parse(execFileSync('tar', ['-xOf', image.archive, 'manifest.json'], { encoding: 'utf8' }));
    assert.deepEqual(manifest[0].RepoTags, [`docker.io/library/${image.reference}`]);
    assert.equal(manifest[0].Layers.length, 2);
    const archived = JSON.parse(execFileSync('skopeo', ['inspect', `docker-archive:${image.archive}`], { encoding: 'utf8' }));
    assert.equal(archived.Labels['org.opencontainers.image.version'], image.tag);

    const bundle = path.join(work, `inspect-${name}`);
    unpackBundle(image.layout, image.tag, bundle);
    const rootfs = path.join(bundle, 'rootfs');
    const keyFiles = execFileSync(
      'find',
      [rootfs, '-type', 'f', '(', '-name', 'api-key', '-o', '-name', 'secrets.key', '-o', '-name', 'credential', '-o', '-name', '*.key', ')'],
      {
        encoding: 'utf8',
      },
    ).trim();
    assert.equal(keyFiles, '', `${name}: no key files`);
    // A PEM private key: its header line followed by base64 (code that names the header is not one).
    const pem = 'PRIVATE KEY-----\\r?\\n[A-Za-z0-9+/=]{40,}';
    const privateKeys = spawnSync('grep', ['-rlIzP', pem, ...['opt', 'etc', 'var'].map((d) => path.join(rootfs, d))], { encoding: 'utf8' }).stdout.trim();
    assert.equal(privateKeys, '', `${name}: no private key`);
    assert.equal(spawnSync('grep', ['-rlI', adminKey, rootfs], { encoding: 'utf8' }).status, 1, 'nothing of this run');
    rmSync(bundle, { recursive: true, force: true });
  }
});

test('the control plane image serves /healthz and the API on a real PostgreSQL, as uid 10001 on a read-only root filesystem', async () => {
  const image = images['control-plane'];
  const bundle = path.join(work, 'control-plane');
  unpackBundle(image.layout, image.tag, bundle);
  cpPort = await freePort();
  const databaseUrl = await postgres!.url('space_images');
  editSpec(bundle, (spec) => {
    assert.deepEqual(spec.process.args, ['space', 'control-plane'], "the image's entrypoint and command");
    assert.equal(spec.process.user.uid, 10001);
    hostNetwork(spec, {
      SPACE_HOST: '127.0.0.1',
      SPACE_PORT: String(cpPort),
      SPACE_DATABASE_URL: databaseUrl,
      SPACE_API_KEY: adminKey,
      SPACE_SECRETS_KEY_FILE: '/var/lib/space/secrets.key',
    });
    spec.root.readonly = true;
    // As the manifests mount them: the data directory and /tmp are emptyDir volumes.
    for (const destination of ['/var/lib/space', '/tmp'])
      spec.mounts.push({ destination, type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=700', 'uid=10001', 'gid=10001'] });
  });
  controlPlane = runContainer(bundle, `space-test-cp-${process.pid}`);
  await controlPlane.waitFor(/control plane on (http:\/\/\S+),/, 60_000);
  const health = await fetch(`http://127.0.0.1:${cpPort}/healthz`);
  assert.equal(health.status, 200);
  api = new Api(`http://127.0.0.1:${cpPort}`, adminKey);
  const token = await api.call('POST', '/v1/nodes/join-tokens', { uses: 1 });
  assert.equal(token.status, 201, JSON.stringify(token.body));
  joinToken = token.body.token;
  const tenants = await api.call('POST', '/v1/tenants', { name: 'image-test' });
  assert.equal(tenants.status, 201, 'written to PostgreSQL');
});

/** Starts the node image's container on the same data directory (again after it stopped). */
async function startNode(nodePort: number): Promise<Container> {
  const image = images.node;
  const bundle = path.join(work, 'node');
  rmSync(bundle, { recursive: true, force: true });
  unpackBundle(image.layout, image.tag, bundle);
  mkdirSync(nodeData, { recursive: true });
  editSpec(bundle, (spec) => {
    assert.deepEqual(spec.process.args, ['space', 'node']);
    hostNetwork(spec, {
      SPACE_NODE_ID: 'image-node',
      SPACE_NODE_HOST: '127.0.0.1',
      SPACE_NODE_PORT: String(nodePort),
      SPACE_CONTROL_PLANE_URL: `http://127.0.0.1:${cpPort}`,
      SPACE_NODE_JOIN_TOKEN: joinToken,
      SPACE_NODE_UNDRAIN_AT_START: '1',
      SPACE_TEMPLATES: 'tiny',
      SPACE_POOL_SIZE: '0',
      SPACE_VOLUME_SIZE_GB: '4',
    });
    privileged(spec, { '/var/lib/space': nodeData });
  });
  const container = runContainer(bundle, nodeContainer);
  await container.waitFor(/node image-node registered with the control plane/, 180_000);
  return container;
}

async function nodeStatus(): Promise<string | undefined> {
  const nodes = (await api.call('GET', '/v1/nodes')).body.nodes as { id: string; status: string }[];
  return nodes.find((n) => n.id === 'image-node')?.status;
}

test('the node image joins with a join token, registers and runs a gVisor sandbox; drained with its own credential as a pod stops, it undrains at its next start', async () => {
  const nodePort = await freePort();
  node = await startNode(nodePort);
  assert.equal(await nodeStatus(), 'ready');
  const session = await api.createSession({ template: 'tiny' });
  assert.equal(session.nodeId, 'image-node');
  assert.equal((await api.exec(session.id, ['sh', '-c', 'echo from the node image; uname -s'])).stdout, 'from the node image\nLinux\n');
  assert.equal((await api.call('DELETE', `/v1/sessions/${session.id}`)).status, 200);

  // A Kubernetes node pod's preStop hook: `space node drain --self`, in the container, with the node's credential only.
  const drain = execInContainer(nodeContainer, ['space', 'node', 'drain', '--self', '--json']);
  assert.equal(drain.status, 0, drain.stderr);
  assert.deepEqual(JSON.parse(drain.stdout), { nodeId: 'image-node', moved: [], failed: [] });
  assert.equal(await nodeStatus(), 'draining');
  assert.equal(await node.stop(), 0, node.output().slice(-3000));
  node = null;
  assert.deepEqual(hostResources(nodeData).mounts, [], 'its storage unmounted as it stopped');

  node = await startNode(nodePort);
  for (let i = 0; i < 50 && (await nodeStatus()) !== 'ready'; i++) await pause(100);
  assert.equal(await nodeStatus(), 'ready', 'SPACE_NODE_UNDRAIN_AT_START: back in placement');
  assert.doesNotMatch(node.output(), /join token/i, 'the second start used the credential kept in the data directory');
});
