import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { Api } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('warm pool', () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];

  /** Ready sandboxes of the tiny pool, from /metrics. */
  const ready = async (): Promise<number> => {
    const text = await (await fetch(`${platform.url}/metrics`)).text();
    return Number(/^space_pool_ready\{template="tiny"\} (\d+)$/m.exec(text)?.[1] ?? NaN);
  };
  const untilPoolFull = async (): Promise<void> => {
    const deadline = Date.now() + 60_000;
    while ((await ready()) < 2 && Date.now() < deadline) await sleep(200);
    assert.equal(await ready(), 2, 'the pool fills up');
  };
  const create = async (body: Record<string, unknown> = {}): Promise<any> => {
    const session = await api.createSession({ template: 'tiny', ...body });
    sessions.push(session.id);
    return session;
  };
  const identity = async (id: string): Promise<string> => (await api.exec(id, 'echo $SPACE_SESSION_ID $GREETING; hostname; cat /etc/machine-id')).stdout;

  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)), { env: { SPACE_POOL_SIZE: '2', SPACE_POOL_TEMPLATES: 'tiny', SPACE_POOL_REFILL_DELAY_MS: '0' } });

  test('sessions get pooled sandboxes with their own identity, environment and files; the pool refills', { timeout: 180_000 }, async () => {
    await untilPoolFull();
    const a = await create({ env: { GREETING: 'hello-a' } });
    const b = await create({ env: { GREETING: 'hello-b' } });
    const [idA, idB] = [await identity(a.id), await identity(b.id)];
    assert.match(idA, new RegExp(`^${a.id} hello-a\\nspace-[a-z0-9]{8}\\n[0-9a-f]{32}\\n$`));
    assert.match(idB, new RegExp(`^${b.id} hello-b\\n`));
    const [, hostA, machineA] = idA.split('\n');
    const [, hostB, machineB] = idB.split('\n');
    assert.notEqual(hostA, hostB);
    assert.notEqual(machineA, machineB);
    // Pooled sandboxes wait at the lowest CPU weight; a claimed one gets the normal weight back.
    const shares = `/sys/fs/cgroup/cpu/space/${a.sandbox.id}/cpu.shares`;
    if (existsSync(shares)) assert.equal(readFileSync(shares, 'utf8').trim(), '1024');

    await api.exec(a.id, 'echo only-a > /workspace/mine');
    assert.equal((await api.exec(b.id, 'test -e /workspace/mine')).exitCode, 1, 'nothing of another session');
    await untilPoolFull();

    // Other resources than the pool's: a sandbox of its own.
    const big = await create({ resources: { memoryMb: 512 } });
    assert.equal((await api.exec(big.id, 'echo ok')).stdout, 'ok\n');
    assert.equal(await ready(), 2);
  });

  test('a claimed sandbox takes full checkpoints and resumes from them', { timeout: 180_000 }, async () => {
    await untilPoolFull();
    const session = await create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    const { pid } = await api.exec(session.id, ['sleep', '600'], { background: true });
    await api.exec(session.id, 'echo kept > /workspace/f');
    const checkpoint = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
    assert.equal(checkpoint.status, 201, JSON.stringify(checkpoint.body));
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    assert.equal((await api.exec(session.id, 'cat /workspace/f')).stdout, 'kept\n');
    const { processes } = (await api.call('GET', `/v1/sessions/${session.id}/processes`)).body;
    assert.ok(processes.some((p: any) => p.pid === pid && p.running), JSON.stringify(processes));
  });
});
