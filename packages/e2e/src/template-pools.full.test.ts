import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Api, metricValue } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const quiet = { checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 };

/** A tenant's template gets a warm pool from its demand, when the pool sizes itself. */
describe("warm pools of tenants' templates", () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];
  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)), {
    env: { SPACE_POOL_SIZE: '1', SPACE_POOL_MAX_MEMORY_MB: '512', SPACE_POOL_TEMPLATES: 'tiny', SPACE_POOL_REFILL_DELAY_MS: '0' },
  });
  const metrics = async (): Promise<string> => (await fetch(`${platform.url}/metrics`)).text();

  test('a custom template asked for is pooled: the next session from it takes a ready sandbox with its files and an identity of its own', {
    timeout: 180_000,
  }, async () => {
    const source = await api.createSession({ template: 'tiny', ...quiet });
    sessions.push(source.id);
    await api.exec(source.id, 'mkdir -p /opt/env && echo prepared > /opt/env/state');
    assert.equal((await api.call('POST', '/v1/templates', { name: 'pooled-env', fromSession: source.id })).status, 201);

    const first = await api.createSession({ template: 'pooled-env', ...quiet });
    sessions.push(first.id);
    // The first demand gave the template a pool: a sandbox of it is booted in the background.
    let poolSeries = '';
    for (let i = 0; i < 150 && !poolSeries; i++, await sleep(200)) poolSeries = /space_pool_ready\{template="custom"\} 1/.exec(await metrics())?.[0] ?? '';
    assert.ok(poolSeries, "the template has a ready sandbox (tenants' templates are counted together)");
    // Unauthenticated: no tenant's template id in /metrics or in the history kept for the console's charts.
    assert.doesNotMatch(await metrics(), /tpl_/);
    assert.doesNotMatch(await (await fetch(`${platform.url}/v1/metrics/history`)).text(), /tpl_/);
    const poolStartsBefore = metricValue(await metrics(), 'space_node_sandbox_starts{origin="pool"}');
    const started = performance.now();
    const second = await api.createSession({ template: 'pooled-env', ...quiet });
    const createMs = performance.now() - started;
    sessions.push(second.id);
    assert.equal(metricValue(await metrics(), 'space_node_sandbox_starts{origin="pool"}'), poolStartsBefore + 1, 'it came from the pool');
    process.stderr.write(`create from a custom template's pool: ${createMs.toFixed(0)} ms\n`);
    const state = async (id: string) => (await api.exec(id, 'cat /opt/env/state; echo $SPACE_SESSION_ID; cat /etc/machine-id')).stdout.split('\n');
    const [filesA, idA, machineA] = await state(first.id);
    const [filesB, idB, machineB] = await state(second.id);
    assert.deepEqual([filesA, filesB, idA, idB], ['prepared', 'prepared', first.id, second.id]);
    assert.notEqual(machineA, machineB);

    // Deleted: its pool goes with it.
    assert.equal((await api.call('DELETE', '/v1/templates/pooled-env?force=1')).status, 200);
    assert.doesNotMatch(await metrics(), /space_pool_ready\{template="custom"\} [1-9]/);
  });
});
