import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api } from './client.js';
import { startPlatform, type RunningPlatform } from './platform.js';

/** A node whose host disk is below its reserve, as one whose disk filled would be: a reserve larger than any disk. */
describe('a node whose host disk is below its reserve', () => {
  let platform: RunningPlatform;
  let api: Api;
  const reserveMb = 2 ** 30;

  before(async () => {
    platform = await startPlatform({ env: { SPACE_HOST_DISK_RESERVE_MB: String(reserveMb), SPACE_TEMPLATES: 'tiny' } });
    api = new Api(platform.url, platform.adminKey);
  });

  after(async () => {
    if (platform.process.exitCode === null) assert.equal(await platform.stop(), 0, platform.output());
  });

  test('refuses new sessions naming the setting, and says its storage is low in /v1/nodes and /metrics', { timeout: 60_000 }, async () => {
    const created = await api.call('POST', '/v1/sessions', { template: 'tiny' });
    assert.deepEqual([created.status, created.body.error?.code], [507, 'NO_SPACE'], JSON.stringify(created.body));
    assert.match(
      created.body.error.message,
      new RegExp(`a new session refused: this node's host disk has \\d+ MB free, under its reserve \\(SPACE_HOST_DISK_RESERVE_MB=${reserveMb}\\)`),
    );
    // The control plane beats for its own node every 2 s.
    let storage = '';
    for (const deadline = Date.now() + 10_000; storage !== 'low' && Date.now() < deadline; await new Promise((r) => setTimeout(r, 200)))
      storage = (await api.call('GET', '/v1/nodes')).body.nodes[0]?.storage;
    assert.equal(storage, 'low');
    const metrics = await fetch(`${platform.url}/metrics`).then((r) => r.text());
    assert.match(metrics, /^space_nodes_storage\{status="low"\} 1$/m);
  });
});
