import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { type Api, metricValue } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('warm pool', () => {
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];

  /** A value from /metrics, e.g. `space_pool_ready{template="tiny"}`. */
  const metric = async (name: string): Promise<number> => metricValue(await (await fetch(`${platform.url}/metrics`)).text(), name);
  /** Ready sandboxes of the tiny pool. */
  const ready = (): Promise<number> => metric('space_pool_ready{template="tiny"}');
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
  const hostnameOf = (id: string): string => `space-${id.split('_')[1]!.slice(0, 8)}`;

  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)), {
    env: { SPACE_POOL_SIZE: '2', SPACE_POOL_MAX_MEMORY_MB: '0', SPACE_POOL_TEMPLATES: 'tiny', SPACE_POOL_REFILL_DELAY_MS: '0', SPACE_TEMPLATE_IMAGES: '1' },
  });

  test('sessions get pooled sandboxes with their own identity, environment and files; the pool refills', { timeout: 180_000 }, async () => {
    await untilPoolFull();
    const a = await create({ env: { GREETING: 'hello-a' } });
    const b = await create({ env: { GREETING: 'hello-b' } });
    assert.deepEqual((await api.call('GET', `/v1/sessions/${a.id}/processes`)).body.processes, [], "the pool's warm-up exec is not listed");
    const [idA, idB] = [await identity(a.id), await identity(b.id)];
    assert.match(idA, new RegExp(`^${a.id} hello-a\\nspace-[a-z0-9]{8}\\n[0-9a-f]{32}\\n$`), 'the hostname the pooled sandbox booted with');
    assert.match(idB, new RegExp(`^${b.id} hello-b\\n`));
    const [, hostA, machineA] = idA.split('\n');
    const [, hostB, machineB] = idB.split('\n');
    assert.notEqual(hostA, hostB);
    assert.notEqual(machineA, machineB);
    // Pooled sandboxes wait at the lowest CPU weight; a claimed one gets the normal weight back.
    const shares = `/sys/fs/cgroup/cpu/space/${a.sandbox.id}/cpu.shares`;
    if (existsSync(shares)) assert.equal(readFileSync(shares, 'utf8').trim(), '1024');
    // Its bundle, edited after the create answered (the exec above waited for that), names the
    // session's volume and the normal weight, for the runtime's later commands on it.
    const bundle = JSON.parse(readFileSync(path.join(platform.dataDir, 'node', 'sandboxes', a.sandbox.id, 'bundle', 'config.json'), 'utf8'));
    assert.match(bundle.root.path, new RegExp(`/${a.id}(/|$)`));
    assert.equal(bundle.linux.resources.cpu.shares, 1024);

    await api.exec(a.id, 'echo only-a > /workspace/mine');
    assert.equal((await api.exec(b.id, 'test -e /workspace/mine')).exitCode, 1, 'nothing of another session');
    await untilPoolFull();

    // Other resources than the pool's: a sandbox of its own.
    const big = await create({ resources: { memoryMb: 512 } });
    assert.equal((await api.exec(big.id, 'echo ok')).stdout, 'ok\n');
    assert.equal(await ready(), 2);
  });

  test('with the pool empty, sessions are restored from the template image, each with an identity of its own', { timeout: 180_000 }, async () => {
    await untilPoolFull();
    const deadline = Date.now() + 60_000;
    while ((await metric('space_template_image_ready{template="tiny"}')) !== 1 && Date.now() < deadline) await sleep(200);
    assert.equal(await metric('space_template_image_ready{template="tiny"}'), 1, "the tiny template's image is built");
    const fromImage = await metric('space_node_sandbox_starts{origin="template-image"}');
    // Two sessions empty the pool; the next two, at once, come from the image (a refill boot takes over a second).
    await create();
    await create();
    const noAutomatic = { checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 };
    const [c, d] = await Promise.all([create({ env: { GREETING: 'hello-c' }, ...noAutomatic }), create({ env: { GREETING: 'hello-d' }, ...noAutomatic })]);
    assert.equal(await metric('space_node_sandbox_starts{origin="template-image"}'), fromImage + 2, 'both restored from the image');
    const listed = (await api.call('GET', `/v1/sessions/${c.id}/processes`)).body.processes;
    assert.deepEqual(listed, [], "none of the image's processes (its warm-up exec) is listed");

    const [idC, idD] = [await identity(c.id), await identity(d.id)];
    assert.match(idC, new RegExp(`^${c.id} hello-c\\n${hostnameOf(c.id)}\\n[0-9a-f]{32}\\n$`), "not the image's hostname");
    assert.match(idD, new RegExp(`^${d.id} hello-d\\n${hostnameOf(d.id)}\\n[0-9a-f]{32}\\n$`));
    assert.notEqual(idC.split('\n')[2], idD.split('\n')[2], 'clones of one image get machine ids of their own');
    const random = async (id: string): Promise<string> => (await api.exec(id, 'head -c 16 /dev/urandom | od -An -tx1')).stdout;
    assert.notEqual(await random(c.id), await random(d.id), "the kernel random state is not the image's");
    // Only the sandbox's init may rename it: the daemon and the session's processes lack CAP_SYS_ADMIN.
    const capEff = async (id: string, pid: string): Promise<bigint> =>
      BigInt(`0x${/CapEff:\s*([0-9a-f]+)/.exec((await api.exec(id, `cat /proc/${pid}/status`)).stdout)![1]}`);
    const sysAdmin = 1n << 21n;
    assert.equal((await capEff(c.id, '1')) & sysAdmin, sysAdmin);
    assert.equal((await capEff(c.id, '2')) & sysAdmin, 0n);
    assert.equal((await capEff(c.id, 'self')) & sysAdmin, 0n);
    assert.notEqual((await api.exec(c.id, 'hostname renamed')).exitCode, 0, 'a session cannot set the hostname');

    await api.exec(c.id, 'echo only-c > /workspace/mine');
    assert.equal((await api.exec(d.id, 'test -e /workspace/mine')).exitCode, 1, 'nothing of another clone');
    // A sandbox from the image runs from a memory image and is fully checkpointed like any other;
    // after a kill the session comes back from that checkpoint, with its files and identity.
    const full = await api.call('POST', `/v1/sessions/${c.id}/checkpoints`, { kind: 'full' });
    assert.equal(full.status, 201, JSON.stringify(full.body));
    await api.call('POST', `/v1/sessions/${c.id}/sandbox/kill`);
    assert.equal((await api.exec(c.id, 'cat /workspace/mine')).stdout, 'only-c\n');
    assert.equal(await identity(c.id), idC, 'a resumed session keeps its identity');
    assert.equal((await api.call('GET', `/v1/sessions/${c.id}`)).body.sandboxHistory.at(-1).restoredFrom, full.body.id);
    const again = await api.call('POST', `/v1/sessions/${c.id}/checkpoints`, { kind: 'full' });
    assert.equal(again.status, 201, 'and fully checkpointed again');
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
    assert.ok(
      processes.some((p: any) => p.pid === pid && p.running),
      JSON.stringify(processes),
    );
  });
});
