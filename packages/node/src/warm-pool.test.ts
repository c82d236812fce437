import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ResourcesSchema, type Resources, type StartSandboxRequest } from '@space/protocol';
import { consoleLogger } from './logger.js';
import { WarmPool, type PoolSandboxes } from './warm-pool.js';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Sandboxes that boot in a few milliseconds and remember what happened to them. */
class FakeSandboxes implements PoolSandboxes {
  booted: string[] = [];
  discarded: string[] = [];
  private next = 0;
  settledGate: Promise<void> = Promise.resolve();

  async bootUnclaimed(template: string, _resources: Resources): Promise<string> {
    await pause(2);
    const id = `sbx_${template}${++this.next}`;
    this.booted.push(id);
    return id;
  }

  settled(): Promise<void> {
    return this.settledGate;
  }

  async discard(sandboxId: string): Promise<void> {
    this.discarded.push(sandboxId);
  }
}

const request = (template: string, resources: Partial<Resources> = {}): StartSandboxRequest => ({
  sessionId: 'ses_test000001',
  template,
  env: {},
  resources: ResourcesSchema.parse(resources),
  egress: { policy: { mode: 'allow-all', domains: [], cidrs: [] }, secrets: [] },
});

async function until(check: () => boolean, ms = 2000): Promise<void> {
  for (const deadline = Date.now() + ms; !check() && Date.now() < deadline; ) await pause(5);
  assert.ok(check(), 'condition not reached in time');
}

function pool(sandboxes: FakeSandboxes, size = 2) {
  return new WarmPool({ size, templates: ['tiny'], refillDelayMs: 1, templateImages: false }, sandboxes, null, consoleLogger('pool-test', true));
}

test('the pool fills to its size; a taken sandbox is replaced once it has its session', async () => {
  const sandboxes = new FakeSandboxes();
  const warm = pool(sandboxes);
  warm.start();
  await until(() => warm.sizes().tiny === 2);
  await pause(50); // the fill loop ends after its pause (refillDelayMs) behind the last boot
  let settle!: () => void;
  sandboxes.settledGate = new Promise((r) => (settle = r));
  const taken = warm.take(request('tiny'));
  assert.equal(taken, sandboxes.booted[0]);
  warm.claimed(taken!);
  await pause(30);
  assert.equal(warm.sizes().tiny, 1, 'no refill boot while the claim is settling');
  settle();
  await until(() => warm.sizes().tiny === 2);
  assert.equal(sandboxes.booted.length, 3);
  await warm.stop();
});

test('a session with other resources or another template gets nothing from the pool', async () => {
  const sandboxes = new FakeSandboxes();
  const warm = pool(sandboxes);
  warm.start();
  await until(() => warm.sizes().tiny === 2);
  assert.equal(warm.take(request('tiny', { memoryMb: 2048 })), null);
  assert.equal(warm.take(request('base')), null);
  assert.equal(warm.sizes().tiny, 2);
  await warm.stop();
});

test('a sandbox that cannot be claimed is discarded and replaced', async () => {
  const sandboxes = new FakeSandboxes();
  const warm = pool(sandboxes, 1);
  warm.start();
  await until(() => warm.sizes().tiny === 1);
  const taken = warm.take(request('tiny'))!;
  await warm.reject(taken);
  assert.deepEqual(sandboxes.discarded, [taken]);
  await until(() => warm.sizes().tiny === 1);
  await warm.stop();
});

test('an empty pool says so at once, and stop() discards every ready sandbox', async () => {
  const sandboxes = new FakeSandboxes();
  const warm = pool(sandboxes, 0);
  warm.start();
  assert.equal(warm.take(request('tiny')), null);
  const full = pool(new FakeSandboxes(), 2);
  full.start();
  await until(() => full.sizes().tiny === 2);
  await full.stop();
  assert.equal(full.sizes().tiny, 0);
});
