// SPACE API fuzz run: a platform on its own data directory takes N hostile requests (default
// 10,000) shaped after the protocol's schemas, raw HTTP and WebSocket garbage; reports every answer
// ≥ 500, every hang, and the platform's memory against a baseline of as many valid calls in the
// same run. Usage: node bench/fuzz.mjs [REQUESTS] [SEED]   (also the last phase of ./space bench)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchKey, startPlatform } from './harness.mjs';
import { fuzzApi } from '../packages/e2e/dist/harness/api-fuzzer.js';
import { deleteFuzzSessions, fuzzPlatformEnv, prepareFuzzTarget } from '../packages/e2e/dist/harness/fuzz-target.js';
import { processRssMb as rssMb } from '../packages/e2e/dist/host-state.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Runs the fuzzer; returns its summary (also printed as a table and written to bench/results). */
export async function runFuzz(requests = 10_000, seed = Date.now() % 1e9) {
  const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
  const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0', ...fuzzPlatformEnv });
  try {
    const target = await prepareFuzzTarget(platform.url, benchKey);
    const rssStart = rssMb(platform.pid);
    // Baseline: as many valid calls, so the memory the fuzz run leaves can be told from what any traffic does.
    const baselineStarted = performance.now();
    for (let i = 0; i < requests; i += 8) {
      await Promise.all(
        Array.from({ length: 8 }, () =>
          fetch(`${platform.url}/v1/sessions/${target.sessionId}`, { headers: { authorization: `Bearer ${target.key}` } }).then((r) => r.text()),
        ),
      );
    }
    const baselineMs = performance.now() - baselineStarted;
    const rssAfterBaseline = rssMb(platform.pid);
    const report = await fuzzApi(target, { requests, seed });
    const rssAfterFuzz = rssMb(platform.pid);
    const healthy = (await fetch(`${platform.url}/healthz`)).ok;
    await deleteFuzzSessions(target);
    const summary = {
      seed,
      requests: report.requests,
      byKind: report.byKind,
      byStatus: report.byStatus,
      serverErrors: report.serverErrors,
      hung: report.hung,
      fuzzMs: report.durationMs,
      baselineMs: Math.round(baselineMs),
      rssMb: { start: +rssStart.toFixed(1), afterBaseline: +rssAfterBaseline.toFixed(1), afterFuzz: +rssAfterFuzz.toFixed(1) },
      healthyAfter: healthy,
      health: report.health,
    };
    console.log(`\nAPI fuzz, seed ${seed} (node bench/fuzz.mjs ${requests} ${seed} replays it)`);
    console.table({
      requests: { value: report.requests },
      'answers >= 500': { value: report.serverErrors.length },
      'hung (no answer in 20 s)': { value: report.hung.length },
      'platform RSS at start, MB': { value: summary.rssMb.start },
      [`after ${requests} valid calls (baseline), MB`]: { value: summary.rssMb.afterBaseline },
      [`after ${requests} fuzz requests, MB`]: { value: summary.rssMb.afterFuzz },
      'fuzz run, s': { value: +(report.durationMs / 1000).toFixed(1) },
      [`/healthz meanwhile, median / worst ms (${report.health.probes} asked)`]: { value: `${report.health.medianMs} / ${report.health.worstMs}` },
      'healthy after': { value: healthy },
    });
    console.log(`answers by status: ${JSON.stringify(report.byStatus)}`);
    console.log(`in flight during the slowest /healthz: ${report.health.worstDuring.join(' | ').slice(0, 600)}`);
    for (const f of [...report.serverErrors, ...report.hung].slice(0, 20)) console.log(`  ${f.status || 'hung'} ${f.request}\n     ${f.reply.slice(0, 200)}`);
    mkdirSync(path.join(root, 'bench/results'), { recursive: true });
    const file = path.join(root, `bench/results/fuzz-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(file, JSON.stringify(summary, null, 2));
    console.log(JSON.stringify({ fuzz: { ...summary, serverErrors: summary.serverErrors.length, hung: summary.hung.length } }));
    return summary;
  } finally {
    await platform.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const summary = await runFuzz(Number(process.argv[2] ?? 10_000), process.argv[3] === undefined ? undefined : Number(process.argv[3]));
  process.exitCode = summary.serverErrors.length || summary.hung.length || !summary.healthyAfter ? 1 : 0;
}
