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

  /** What each sandbox is measured to take, MB (none: not readable). */
  memory: (sandboxId: string) => number | null = () => null;

  async memoryMb(sandboxId: string): Promise<number | null> {
    return this.memory(sandboxId);
  }
}

const request = (template: string, resources: Partial<Resources> = {}): StartSandboxRequest => ({
  sessionId: 'ses_test000001',
  template,
  env: {},
  resources: ResourcesSchema.parse(resources),
  egress: { policy: { mode: 'allow-all', domains: [], cidrs: [] }, secrets: [] },
  services: [],
  mounts: [],
});

async function until(check: () => boolean, ms = 2000): Promise<void> {
  for (const deadline = Date.now() + ms; !check() && Date.now() < deadline; ) await pause(5);
  assert.ok(check(), 'condition not reached in time');
}

function pool(
  sandboxes: FakeSandboxes,
  size = 2,
  adaptive: { maxMemoryMb: number; demandWindowMs?: number; demandMemoryMs?: number } = { maxMemoryMb: 0 },
  startsSettled?: () => Promise<void>,
) {
  return new WarmPool(
    { size, templates: ['tiny'], refillDelayMs: 1, templateImages: false, sandboxMemoryMb: 100, demandMemoryMs: 0, ...adaptive },
    sandboxes,
    null,
    consoleLogger('pool-test', true),
    startsSettled,
  );
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

test("a refill boots only once no sandbox is starting on the node: a burst's own starts go first", async () => {
  const sandboxes = new FakeSandboxes();
  let starts: Promise<void> = Promise.resolve();
  const warm = pool(sandboxes, 2, { maxMemoryMb: 0 }, () => starts);
  warm.start();
  await until(() => warm.sizes().tiny === 2);
  await pause(50);
  let startsEnded!: () => void;
  starts = new Promise((r) => (startsEnded = r));
  warm.claimed(warm.take(request('tiny'))!);
  assert.equal(warm.take(request('tiny')), sandboxes.booted[1]);
  await pause(50);
  assert.deepEqual(warm.sizes(), { tiny: 0 }, 'no refill boot while sandboxes are starting');
  assert.equal(sandboxes.booted.length, 2);
  startsEnded();
  await until(() => warm.sizes().tiny === 2);
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

test('the pool sizes itself: it grows to the recent demand within the memory budget, and shrinks back', async () => {
  const sandboxes = new FakeSandboxes();
  // Budget for 6 sandboxes of 100 MB; demand counts over 300 ms.
  const warm = pool(sandboxes, 1, { maxMemoryMb: 600, demandWindowMs: 300 });
  warm.start();
  await until(() => warm.sizes().tiny === 1);
  for (let i = 0; i < 4; i++) warm.take(request('tiny'));
  assert.equal(warm.target('tiny'), 4, 'as many as were asked for');
  await until(() => warm.sizes().tiny === 4);
  for (let i = 0; i < 10; i++) warm.take(request('tiny'));
  assert.equal(warm.target('tiny'), 6, 'no more than the budget holds');
  await until(() => warm.sizes().tiny === 6);
  await pause(100);
  assert.equal(warm.sizes().tiny, 6, 'and never more');
  await until(() => warm.sizes().tiny === 1, 3000);
  assert.equal(warm.target('tiny'), 1, 'demand gone: back to the minimum');
  assert.ok(sandboxes.discarded.length >= 5, 'the extra sandboxes were discarded');
  await warm.stop();
});

test('a template whose ready sandboxes take more than the configured figure (a warm kernel) counts what they were measured to take', async () => {
  const sandboxes = new FakeSandboxes();
  // Budget 600 MB at 100 a sandbox; tiny's take 60 once booted (counted as 100), 190 once they sat in the pool.
  let sat = false;
  sandboxes.memory = () => (sat ? 190 : 60);
  const warm = pool(sandboxes, 1, { maxMemoryMb: 600, demandWindowMs: 300 });
  warm.start();
  await until(() => warm.sizes().tiny === 1);
  assert.equal(warm.costMb('tiny'), 100, 'never below the configured figure');
  sat = true;
  for (let i = 0; i < 10; i++) warm.take(request('tiny'));
  await until(() => warm.costMb('tiny') === 190);
  assert.equal(warm.target('tiny'), 3, 'what 600 MB hold at 190 each');
  await until(() => warm.sizes().tiny === 3);
  await pause(100);
  assert.equal(warm.sizes().tiny, 3, 'and never more');
  await warm.stop();
});

test('a burst is remembered past its window and fades out over the memory, so a repeat finds the pool ready', async () => {
  const sandboxes = new FakeSandboxes();
  // Budget for 6; a burst is what comes within 300 ms, remembered for 1.5 s.
  const warm = pool(sandboxes, 1, { maxMemoryMb: 600, demandWindowMs: 300, demandMemoryMs: 1500 });
  warm.start();
  await until(() => warm.sizes().tiny === 1);
  for (let i = 0; i < 5; i++) warm.take(request('tiny'));
  await until(() => warm.sizes().tiny === 5);
  await pause(500);
  assert.equal(warm.sizes().tiny, 5, 'a window after the burst, still ready for it');
  await until(() => warm.sizes().tiny < 5 && warm.sizes().tiny > 1, 1500);
  await until(() => warm.sizes().tiny === 1, 3000);
  await warm.stop();
});

test('with no memory budget the pool keeps its fixed size whatever the demand', async () => {
  const sandboxes = new FakeSandboxes();
  const warm = pool(sandboxes, 2);
  warm.start();
  await until(() => warm.sizes().tiny === 2);
  for (let i = 0; i < 10; i++) warm.take(request('tiny'));
  assert.equal(warm.target('tiny'), 2);
  await until(() => warm.sizes().tiny === 2);
  await warm.stop();
});

test("a tenant's template gets a pool from its first demand while the pool sizes itself, and loses it when demand is gone or it is deleted", async () => {
  const sandboxes = new FakeSandboxes();
  const warm = pool(sandboxes, 1, { maxMemoryMb: 600, demandWindowMs: 300 });
  warm.start();
  await until(() => warm.sizes().tiny === 1);
  assert.equal(warm.take(request('tpl_custom000001')), null, 'nothing ready at the first demand');
  await until(() => warm.sizes().tpl_custom000001 === 1);
  const taken = warm.take(request('tpl_custom000001'));
  assert.equal(taken, sandboxes.booted.at(-1));
  // No demand for a window: trimmed to none, and no pool any more; the configured one keeps its size.
  await until(() => !('tpl_custom000001' in warm.sizes()), 3000);
  assert.equal(warm.sizes().tiny, 1);
  warm.take(request('tpl_other0000001'));
  await until(() => warm.sizes().tpl_other0000001 === 1);
  await warm.forget('tpl_other0000001');
  assert.ok(!('tpl_other0000001' in warm.sizes()));
  assert.ok(sandboxes.discarded.includes(sandboxes.booted.at(-1)!), 'its ready sandbox was discarded');
  const fixed = pool(new FakeSandboxes(), 1);
  assert.equal(fixed.take(request('tpl_custom000001')), null, 'a pool of fixed size keeps to its templates');
  assert.ok(!('tpl_custom000001' in fixed.sizes()));
  await warm.stop();
});

test('a template forgotten while a sandbox of it boots: that sandbox is discarded, and the pool still stops cleanly', async () => {
  const sandboxes = new FakeSandboxes();
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const boot = sandboxes.bootUnclaimed.bind(sandboxes);
  sandboxes.bootUnclaimed = async (template, resources) => {
    if (template.startsWith('tpl_')) await gate;
    return boot(template, resources);
  };
  const warm = pool(sandboxes, 1, { maxMemoryMb: 600, demandWindowMs: 300 });
  warm.start();
  await until(() => warm.sizes().tiny === 1);
  warm.take(request('tpl_gone00000001'));
  await pause(20);
  await warm.forget('tpl_gone00000001');
  release();
  await until(() => sandboxes.discarded.some((id) => id.startsWith('sbx_tpl_gone')));
  await warm.stop();
  assert.deepEqual(
    sandboxes.booted.filter((id) => !sandboxes.discarded.includes(id)),
    [],
    'every sandbox it booted is discarded',
  );
});
