// Computer use on the `desktop` template, measured in one run on one `space up` (its pool warm):
// - a desktop session created (pooled) to its first screenshot, against create + first exec on the
//   same template (the floor: what a session costs before its display starts);
// - a screenshot's round trip (a full-screen PNG), against the display's state (the same path, no
//   picture and no program run);
// - a click to the screenshot that shows it (a page that turns its background blue on click);
// - a full checkpoint with Chromium open (its pause, its call) and the first screenshot after the
//   sandbox is killed (the resume from it included);
// - memory of an idle desktop, then with Chromium open on a page.
// Usage: node bench/desktop.mjs [RUNS=20]   (writes bench/results/desktop-<time>.json)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { api, startPlatform, timed, transfer } from './harness.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const runs = Number(process.argv[2] ?? 20);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const page = `data:text/html,<body style="margin:0;background:rgb(255,255,255)" onclick="document.body.style.background='rgb(30,60,200)'"></body>`;
const desktopSession = { template: 'desktop', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 };

const { results, rows, record } = recorder();
const platform = await startPlatform(dataDir, { SPACE_TEMPLATES: 'tiny,desktop', SPACE_POOL_SIZE: '2' });
const made = [];
try {
  const create = async () => {
    const session = await api(platform.url, 'POST', '/v1/sessions', desktopSession);
    made.push(session.id);
    return `/v1/sessions/${session.id}`;
  };
  const screenshot = async (p) => {
    if ((await transfer(platform.url, 'GET', `${p}/desktop/screenshot`, 0)) < 100) throw new Error('no picture');
  };
  // The pool refills between samples: a create is timed only once a pooled sandbox is ready again.
  const poolReady = async () => {
    for (let i = 0; i < 120; i++) {
      const metrics = await api(platform.url, 'GET', '/metrics');
      if (/space_pool_ready\{[^}]*template="desktop"[^}]*\} [1-9]/.test(metrics)) return;
      await sleep(500);
    }
  };
  const firstScreenshots = [];
  const firstExecs = [];
  for (let i = 0; i < Math.min(runs, 8); i++) {
    await poolReady();
    firstScreenshots.push((await timed(async () => screenshot(await create())))[0]);
    await poolReady();
    firstExecs.push((await timed(async () => api(platform.url, 'POST', `${await create()}/exec`, { cmd: ['true'] })))[0]);
    while (made.length) await api(platform.url, 'DELETE', `/v1/sessions/${made.pop()}`);
  }
  record('create a desktop session (pooled) to its first screenshot', firstScreenshots);
  record('floor: create (pooled) to a first exec, same template', firstExecs);

  const session = await create();
  await screenshot(session);
  const idle = await api(platform.url, 'GET', `${session}/metrics`);
  await api(platform.url, 'POST', `${session}/desktop/launch`, { app: 'chromium', url: page });
  await sleep(8000);
  const browsing = await api(platform.url, 'GET', `${session}/metrics`);
  const series = async (name, fn) => {
    const samples = [];
    for (let i = 0; i < runs; i++) samples.push((await timed(fn))[0]);
    record(name, samples);
  };
  await series('screenshot round trip (1024x768 PNG)', () => screenshot(session));
  await series('floor: state round trip (same path, no picture)', () => api(platform.url, 'GET', `${session}/desktop/state`));
  await series('cursor round trip (runs xdotool)', () => api(platform.url, 'GET', `${session}/desktop/cursor`));
  await series('click, then a screenshot', async () => {
    await api(platform.url, 'POST', `${session}/desktop/input`, { type: 'click', x: 600, y: 500 });
    await screenshot(session);
  });

  const pauses = [];
  const calls = [];
  const resumes = [];
  for (let i = 0; i < Math.min(runs, 5); i++) {
    const [took, checkpoint] = await timed(() => api(platform.url, 'POST', `${session}/checkpoints`, { kind: 'full' }));
    if (checkpoint.kind !== 'full') throw new Error(`a ${checkpoint.kind} checkpoint`);
    pauses.push(checkpoint.pauseMs);
    calls.push(took);
    await api(platform.url, 'POST', `${session}/sandbox/kill`);
    resumes.push((await timed(() => screenshot(session)))[0]);
  }
  record('full checkpoint with Chromium open: pause', pauses);
  record('full checkpoint with Chromium open: the call', calls);
  record('first screenshot after a kill (resume from the full checkpoint)', resumes);
  results.memory = { idleDesktopBytes: idle.memoryBytes, withChromiumBytes: browsing.memoryBytes };
  console.log(`memory: idle desktop ${(idle.memoryBytes / 1e6).toFixed(0)} MB, with Chromium on a page ${(browsing.memoryBytes / 1e6).toFixed(0)} MB`);
} finally {
  for (const id of made) await api(platform.url, 'DELETE', `/v1/sessions/${id}`).catch(() => undefined);
  await platform.stop();
}
printTable(rows);
const ratio = (a, b) => (results[a].median / results[b].median).toFixed(2);
console.log(`\nscreenshot / state round trip, median: ${ratio('screenshot round trip (1024x768 PNG)', 'floor: state round trip (same path, no picture)')}x`);
console.log(
  `first screenshot / first exec after a pooled create, median: ${ratio('create a desktop session (pooled) to its first screenshot', 'floor: create (pooled) to a first exec, same template')}x`,
);
mkdirSync(path.join(root, 'bench/results'), { recursive: true });
const file = path.join(root, `bench/results/desktop-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ runs, results }, null, 2));
console.log(`JSON: ${file}`);
