import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Api } from './client.js';
import { hostResources } from './host-state.js';
import { startPlatform, testDataDir, type RunningPlatform } from './platform.js';

/**
 * The node agent and the control plane as separate processes, talking over the authenticated node
 * API, running beside a whole `space up` on its own data directory and port.
 */
describe('separate layers and side-by-side instances', () => {
  const layersDir = `${testDataDir}-layers`;
  let node: RunningPlatform;
  let controlPlane: RunningPlatform;
  let neighbour: RunningPlatform;

  before(async () => {
    node = await startPlatform({
      dataDir: layersDir,
      command: 'node',
      env: { SPACE_NODE_PORT: '0', SPACE_TEMPLATES: 'tiny' },
      readyPattern: /node \S+ up: (http:\/\/\S+)/,
    });
    const token = readFileSync(`${layersDir}/node/token`, 'utf8').trim();
    controlPlane = await startPlatform({
      dataDir: layersDir,
      command: 'control-plane',
      env: { SPACE_NODE_URL: node.url, SPACE_NODE_TOKEN: token },
      readyPattern: /control plane on (http:\/\/\S+),/,
    });
    neighbour = await startPlatform();
  });

  after(async () => {
    for (const p of [controlPlane, node, neighbour]) if (p) assert.equal(await p.stop(), 0, p.output());
    for (const dir of [layersDir, testDataDir]) {
      const left = hostResources(dir);
      assert.deepEqual([left.runsc, left.mounts, left.loops, left.staged], [[], [], [], []], dir);
    }
  });

  test('the node API refuses calls without its token', { timeout: 30_000 }, async () => {
    assert.equal((await new Api(node.url, null).call('GET', '/node/v1/health')).status, 401);
    assert.equal((await new Api(node.url, 'wrong').call('POST', '/node/v1/sandboxes', {})).status, 401);
    const token = readFileSync(`${layersDir}/node/token`, 'utf8').trim();
    const health = await new Api(node.url, token).call('GET', '/node/v1/health');
    assert.equal(health.status, 200);
    assert.deepEqual(health.body.templates.sort(), ['base', 'code-interpreter', 'desktop', 'tiny']);
  });

  test('sessions work through a separate control plane, next to another instance', { timeout: 120_000 }, async () => {
    const split = new Api(controlPlane.url, controlPlane.adminKey);
    const whole = new Api(neighbour.url, neighbour.adminKey);
    const [a, b] = await Promise.all([split.createSession({ template: 'tiny' }), whole.createSession({ template: 'tiny' })]);
    assert.equal((await split.exec(a.id, 'echo from-split')).stdout, 'from-split\n');
    assert.equal((await whole.exec(b.id, 'echo from-whole')).stdout, 'from-whole\n');
    // Each instance knows only its own sessions.
    assert.equal((await whole.call('GET', `/v1/sessions/${a.id}`)).status, 404);
    assert.equal((await split.call('DELETE', `/v1/sessions/${a.id}`)).status, 200);
    assert.equal((await whole.call('DELETE', `/v1/sessions/${b.id}`)).status, 200);
  });

  test('a second instance on a data directory in use is refused and disturbs nothing', { timeout: 60_000 }, async () => {
    await assert.rejects(startPlatform(), /another SPACE node agent \(pid \d+\) is using/);
    const whole = new Api(neighbour.url, neighbour.adminKey);
    const session = await whole.createSession({ template: 'tiny' });
    assert.equal((await whole.exec(session.id, 'echo undisturbed')).stdout, 'undisturbed\n');
    await whole.call('DELETE', `/v1/sessions/${session.id}`);
  });
});
