// Bursts of creates at a steady rate with the node's default pool settings: 60 creates of `base` at
// ~6/s (one every 166 ms, none waiting for another), each followed by its first exec; the sessions
// are deleted, and after a pause a second burst repeats the demand. Run with a pool of fixed size
// (SPACE_POOL_MAX_MEMORY_MB=0: the pool before it sized itself) and with the pool that sizes itself,
// one after the other in the same run.
// Usage: node bench/create-burst.mjs [--quick]   (writes bench/results/burst-<time>.json)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, startPlatform, timed } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const quick = process.argv.includes('--quick');
const creates = quick ? 30 : 60;
const intervalMs = 166;
const pauseBetweenBurstsMs = 20_000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function createAndExec(url) {
  const [ms, id] = await timed(async () => {
    const session = await api(url, 'POST', '/v1/sessions', { template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    await api(url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['true'] });
    return session.id;
  });
  return { ms, id };
}

/** `creates` creates started `intervalMs` apart; resolves with each one's latency. */
async function burst(url) {
  const pending = [];
  for (let i = 0; i < creates; i++) {
    pending.push(createAndExec(url));
    await sleep(intervalMs);
  }
  return Promise.all(pending);
}

async function measure(label, env, record) {
  const platform = await startPlatform(dataDir, { SPACE_POOL_TEMPLATES: 'base', SPACE_TEMPLATE_IMAGES: '0', ...env });
  try {
    await sleep(5000); // the default pool (2) fills
    for (const round of ['1st', '2nd']) {
      const results = await burst(platform.url);
      record(
        `${label}: ${round} burst, create + first exec`,
        results.map((r) => r.ms),
      );
      for (const { id } of results) await api(platform.url, 'DELETE', `/v1/sessions/${id}`).catch(() => undefined);
      await sleep(pauseBetweenBurstsMs);
    }
  } finally {
    await platform.stop();
  }
}

const { results, rows, record } = recorder();
await measure('fixed pool of 2', { SPACE_POOL_MAX_MEMORY_MB: '0' }, record);
await measure('pool sizing itself', {}, record);
printTable(rows);
const out = path.join(root, 'bench/results');
mkdirSync(out, { recursive: true });
const file = path.join(out, `burst-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ creates, intervalMs, results }, null, 2));
console.log(`JSON: ${file}`);
