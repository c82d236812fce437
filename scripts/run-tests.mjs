// Runs SPACE's tests with node:test. Unit tests sit next to the code (packages/*/src/**/*.test.ts,
// compiled to dist); end-to-end tests are in packages/e2e. `--fast` runs the unit tests and the
// fast end-to-end suite; the default adds the full end-to-end suite.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { goBinary, goEnvironment } from './go-toolchain.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const fast = args.includes('--fast');
const only = args.filter((a) => !a.startsWith('--'));

function find(dir, pattern, out = []) {
  for (const entry of readdirSync(dir)) {
    const full = path.join(dir, entry);
    if (entry === 'node_modules') continue;
    if (statSync(full).isDirectory()) find(full, pattern, out);
    else if (pattern.test(entry)) out.push(full);
  }
  return out;
}

const unit = readdirSync(path.join(root, 'packages'))
  .filter((p) => p !== 'e2e')
  .flatMap((p) => {
    const dist = path.join(root, 'packages', p, 'dist');
    try {
      return find(dist, /\.test\.js$/);
    } catch {
      return [];
    }
  });
const e2eDir = path.join(root, 'packages/e2e/dist');
const e2eFast = find(e2eDir, /\.fast\.test\.js$/);
const e2eFull = find(e2eDir, /\.full\.test\.js$/);

// Format and lint first (Biome, config in biome.json; gofmt, go vet and go test for the in-sandbox
// agent): a whole run, fast or full, fails on either. `npx biome check --write .` and `gofmt -w
// packages/agent` fix what they can.
if (only.length === 0) {
  console.log("checking format and lint (biome ci; gofmt and go vet of packages/agent and of the node's spawner)");
  const lint = spawnSync(path.join(root, 'node_modules/.bin/biome'), ['ci', '.'], { stdio: 'inherit', cwd: root });
  if (lint.status !== 0) {
    console.error('format or lint check failed: run "npx biome check --write ." and fix what remains');
    process.exit(1);
  }
  const goBin = path.dirname(goBinary());
  const agentDir = path.join(root, 'packages/agent');
  for (const goDir of [agentDir, path.join(root, 'packages/node/native/space-spawner')]) {
    const unformatted = spawnSync(path.join(goBin, 'gofmt'), ['-l', '.'], { cwd: goDir, encoding: 'utf8' });
    if (unformatted.status !== 0 || unformatted.stdout.trim()) {
      console.error(`gofmt: not formatted (run "gofmt -w ${path.relative(root, goDir)}"): ${unformatted.stdout.trim() || unformatted.stderr}`);
      process.exit(1);
    }
    const vet = spawnSync(path.join(goBin, 'go'), ['vet', '.'], { cwd: goDir, stdio: 'inherit', env: goEnvironment() });
    if (vet.status !== 0) process.exit(1);
  }
  console.log('unit tests of packages/agent (go test)');
  const goTest = spawnSync(path.join(goBin, 'go'), ['test', '.'], { cwd: agentDir, stdio: 'inherit', env: goEnvironment() });
  if (goTest.status !== 0) process.exit(1);
  // The agent's hand-written WebSocket reader against arbitrary client bytes, briefly (a failing
  // input is kept in packages/agent/testdata/fuzz and replayed by every later go test).
  console.log("fuzzing the agent's WebSocket reader for 5 s (go test -fuzz FuzzReadMessage)");
  const fuzz = spawnSync(path.join(goBin, 'go'), ['test', '-run', '^$', '-fuzz', '^FuzzReadMessage$', '-fuzztime', '5s', '.'], {
    cwd: agentDir,
    stdio: 'inherit',
    env: goEnvironment(),
  });
  if (fuzz.status !== 0) process.exit(1);
}

let files = [...unit, ...e2eFast, ...(fast ? [] : e2eFull)];
if (only.length) files = files.filter((f) => only.some((o) => f.includes(o)));
console.log(`running ${files.length} test files (${fast ? 'fast' : 'full'} suite)`);
if (files.some((f) => f.includes(`${path.sep}e2e${path.sep}`))) prepareTemplates();

/**
 * Builds the templates the end-to-end tests use before they run, with progress shown: the tests
 * start their platforms quietly, and the first `base` build on a new machine takes minutes.
 */
function prepareTemplates() {
  const dataDir = process.env.SPACE_TEST_DATA_DIR ?? '/var/lib/space-test';
  console.log(`preparing templates in ${dataDir} (built once per machine)`);
  const prep = spawnSync(
    process.execPath,
    [
      '-e',
      `
    const { spawn } = require('node:child_process');
    const child = spawn(process.execPath, [${JSON.stringify(path.join(root, 'packages/cli/dist/main.js'))}, 'up'], {
      env: { ...process.env, SPACE_DATA_DIR: ${JSON.stringify(dataDir)}, SPACE_PORT: '0', SPACE_API_KEY: 'template-preparation', SPACE_POOL_SIZE: '0', SPACE_TEMPLATE_IMAGES: '0' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout.on('data', (d) => { if (String(d).includes('SPACE is up')) child.kill('SIGTERM'); });
    child.on('exit', (code) => process.exit(code ?? 1));
  `,
    ],
    { stdio: 'inherit' },
  );
  if (prep.status !== 0) {
    console.error('could not prepare the templates; see the lines above');
    process.exit(1);
  }
}
// One file at a time: the end-to-end files share the machine's sandboxes, cores and test data
// directory. A file whose tests (and hooks) are done exits even if a failed test left a handle open
// (--test-force-exit): a chaos run that failed once kept its file, and so the suite, waiting forever.
const result = files.length
  ? spawnSync(process.execPath, ['--test', '--test-force-exit', '--test-concurrency=1', '--test-reporter=spec', ...files], { stdio: 'inherit', cwd: root })
  : { status: 0 };
const python = !fast && (only.length === 0 || only.some((o) => 'packages/python'.includes(o))) ? runPythonTests() : 0;
process.exit(result.status || python);

/**
 * The Python SDK's tests (pytest, Debian's) against a real platform: the SDK installed into a venv of
 * Debian's Python (`.tools/python-venv`, its system packages visible), offline, as a user would install it.
 */
function runPythonTests() {
  const venv = path.join(root, '.tools/python-venv');
  const python = path.join(venv, 'bin/python');
  const step = (what, argv, options = {}) => {
    const ran = spawnSync(argv[0], argv.slice(1), { stdio: 'inherit', cwd: root, ...options });
    if (ran.status !== 0) console.error(`${what} failed`);
    return ran.status ?? 1;
  };
  console.log('the Python SDK: pip install ./packages/python into .tools/python-venv, pyflakes, then pytest packages/python/tests');
  if (!existsSync(python) && step('python3 -m venv', ['/usr/bin/python3', '-m', 'venv', '--system-site-packages', venv]) !== 0) return 1;
  const install = ['-m', 'pip', 'install', '--quiet', '--no-index', '--no-build-isolation', '--no-deps', '--force-reinstall', './packages/python'];
  if (step('pip install ./packages/python', [python, ...install]) !== 0) return 1;
  if (step('pyflakes (unused names, undefined names)', [python, '-m', 'pyflakes', 'packages/python', 'examples', 'packages/agent/code-server']) !== 0) return 1;
  return step('pytest', [python, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'packages/python/tests'], {
    env: { ...process.env, SPACE_NODE: process.execPath },
  });
}
