// Runs SPACE's tests with node:test. Unit tests sit next to the code (packages/*/src/**/*.test.ts,
// compiled to dist); end-to-end tests are in packages/e2e. `--fast` runs the unit tests and the
// fast end-to-end suite; the default adds the full end-to-end suite.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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

let files = [...unit, ...e2eFast, ...(fast ? [] : e2eFull)];
if (only.length) files = files.filter((f) => only.some((o) => f.includes(o)));
console.log(`running ${files.length} test files (${fast ? 'fast' : 'full'} suite)`);
// One file at a time: the end-to-end files share the machine's sandboxes, cores and test data directory.
const result = spawnSync(process.execPath, ['--test', '--test-concurrency=1', '--test-reporter=spec', ...files], { stdio: 'inherit', cwd: root });
process.exit(result.status ?? 1);
