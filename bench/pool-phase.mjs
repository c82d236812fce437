// Warm-pool phase of the benchmark: sequential and concurrent creates served from the pool, and the
// exec latency of a running session while the pool is full and while it refills.
import { api, metric, startPlatform, timed } from './harness.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function poolReady(url) {
  return (await metric(url, 'space_pool_ready{template="base"}')) || 0;
}

async function waitForPool(url, size) {
  const started = performance.now();
  while ((await poolReady(url)) < size) await sleep(500);
  return performance.now() - started;
}

async function createAndExec(url) {
  const [createMs, session] = await timed(() => api(url, 'POST', '/v1/sessions', { template: 'base' }));
  const [execMs] = await timed(() => api(url, 'POST', `/v1/sessions/${session.id}/exec`, { cmd: ['true'] }));
  return { id: session.id, createMs, totalMs: createMs + execMs };
}

async function execSeries(url, sessionId, count) {
  const samples = [];
  for (let i = 0; i < count; i++) samples.push((await timed(() => api(url, 'POST', `/v1/sessions/${sessionId}/exec`, { cmd: ['true'] })))[0]);
  return samples;
}

export async function measurePool({ dataDir, poolSize, record, concurrent, execRuns }) {
  const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: String(poolSize), SPACE_POOL_TEMPLATES: 'base', SPACE_POOL_REFILL_DELAY_MS: '0' });
  const sessions = [];
  try {
    const fillMs = await waitForPool(platform.url, poolSize);
    console.error(`warm pool of ${poolSize} base sandboxes filled in ${(fillMs / 1000).toFixed(0)} s`);
    const created = [];
    for (let i = 0; i < poolSize; i++) created.push(await createAndExec(platform.url));
    sessions.push(...created.map((c) => c.id));
    record(
      'create base from the warm pool (sequential)',
      created.map((c) => c.createMs),
    );
    record(
      'create base from the warm pool + first exec (sequential)',
      created.map((c) => c.totalMs),
    );

    // Exec latency of a running session: pool full, then while it refills after being drained.
    for (const id of sessions.splice(0)) await api(platform.url, 'DELETE', `/v1/sessions/${id}`);
    await waitForPool(platform.url, Math.min(poolSize, concurrent));
    const probe = await createAndExec(platform.url);
    sessions.push(probe.id);
    await waitForPool(platform.url, Math.min(poolSize, concurrent));
    record('exec `true`, pool idle', await execSeries(platform.url, probe.id, execRuns));

    const [allMs, burst] = await timed(() => Promise.all(Array.from({ length: concurrent }, () => createAndExec(platform.url))));
    sessions.push(...burst.map((c) => c.id));
    record(`${concurrent} concurrent creates: all ready (create + first exec)`, [allMs]);
    record(
      `${concurrent} concurrent creates: each (create + first exec)`,
      burst.map((c) => c.totalMs),
    );
    record('exec `true`, pool refilling', await execSeries(platform.url, probe.id, execRuns));
  } finally {
    for (const id of sessions) await api(platform.url, 'DELETE', `/v1/sessions/${id}`).catch(() => undefined);
    await platform.stop();
  }
}

/**
 * Snapshot preloading: with no warm pool, `runs` sequential creates of base restored from the
 * template's memory image. `coldToo` also measures cold boots (images off) in this run, as the baseline.
 */
export async function measureTemplateImages({ dataDir, record, runs, coldToo }) {
  const series = [['template image', '1']];
  if (coldToo) series.unshift(['cold boot', '0']);
  for (const [label, images] of series) {
    const platform = await startPlatform(dataDir, { SPACE_POOL_SIZE: '0', SPACE_POOL_TEMPLATES: 'base', SPACE_TEMPLATE_IMAGES: images });
    const sessions = [];
    try {
      if (images === '1') {
        const [waitMs] = await timed(async () => {
          while ((await metric(platform.url, 'space_template_image_ready{template="base"}')) !== 1) await sleep(200);
        });
        console.error(`base template image ready ${(waitMs / 1000).toFixed(1)} s after the platform answered`);
      }
      const created = [];
      for (let i = 0; i < runs; i++) created.push(await createAndExec(platform.url));
      sessions.push(...created.map((c) => c.id));
      const origin = images === '1' ? 'template-image' : 'boot';
      const served = await metric(platform.url, `space_node_sandbox_starts{origin="${origin}"}`);
      if (served !== runs) throw new Error(`expected ${runs} sandboxes started by ${origin}, the node counted ${served}`);
      record(
        `create base, ${label} (no pool, sequential)`,
        created.map((c) => c.createMs),
      );
      record(
        `create base, ${label} + first exec`,
        created.map((c) => c.totalMs),
      );
    } finally {
      for (const id of sessions) await api(platform.url, 'DELETE', `/v1/sessions/${id}`).catch(() => undefined);
      await platform.stop();
    }
  }
}
