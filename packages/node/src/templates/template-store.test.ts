import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { SpaceError } from '@space/protocol';
import { runCommand } from '../run-command.js';
import { BtrfsVolume } from '../storage/btrfs-volume.js';
import { Subvolumes } from '../storage/subvolumes.js';
import { recipeHash, type TemplateRecipe } from './recipes.js';
import { TemplateStore } from './template-store.js';

// A real btrfs filesystem in a loop-mounted image (needs root, as SPACE does).
const dataDir = mkdtempSync(path.join(tmpdir(), 'space-templates-'));
const volume = new BtrfsVolume(dataDir, 1);
let builds = 0;

function recipe(version: string, fail = false): TemplateRecipe {
  return {
    name: 'probe',
    description: 'a file that names its version',
    fingerprint: `probe:${version}`,
    async build(root) {
      builds++;
      await writeFile(path.join(root, 'version'), version);
      if (fail) throw new Error('recipe failed on purpose');
    },
  };
}

before(() => volume.mount());
after(async () => {
  await volume.unmount();
  rmSync(dataDir, { recursive: true, force: true });
});

test('a template is built once, read-only, and rebuilt only when its recipe changes', async () => {
  const v1 = new TemplateStore(volume, new Subvolumes(), [recipe('1')], { cacheDir: path.join(dataDir, 'cache'), debianMirror: null });
  const [a, b] = await Promise.all([v1.ensure('probe'), v1.ensure('probe')]);
  assert.equal(a, b);
  assert.equal(builds, 1, 'concurrent ensures share one build');
  assert.equal(path.basename(a), `probe@${recipeHash(recipe('1'))}`);
  await assert.rejects(writeFile(path.join(a, 'version'), 'changed'), { code: 'EROFS' });
  await v1.ensure('probe');
  assert.equal(builds, 1, 'an existing build is reused');

  const v2 = new TemplateStore(volume, new Subvolumes(), [recipe('2')], { cacheDir: path.join(dataDir, 'cache'), debianMirror: null });
  const c = await v2.ensure('probe');
  assert.equal(builds, 2);
  assert.notEqual(c, a);
  assert.ok(!existsSync(a), 'the old version is removed');
  assert.throws(() => v2.recipe('nope'), { code: 'UNKNOWN_TEMPLATE' });
});

test('a failed build leaves nothing behind and says why', async () => {
  const broken = new TemplateStore(volume, new Subvolumes(), [{ ...recipe('3', true), name: 'broken' }], {
    cacheDir: path.join(dataDir, 'cache'),
    debianMirror: null,
  });
  await assert.rejects(broken.ensure('broken'), (err: Error & { code?: string }) => err.code === 'TEMPLATE_BUILD_FAILED' && /on purpose/.test(err.message));
  assert.deepEqual(
    readdirSync(volume.dir('templates')).filter((n) => n.includes('broken')),
    [],
  );
});

/** The pids of processes whose command line is exactly `argv` (read from /proc). */
function processesRunning(argv: string[]): number[] {
  const wanted = `${argv.join('\0')}\0`;
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8') === wanted;
      } catch {
        return false;
      }
    })
    .map(Number);
}

test('a node that stops during a build kills it with what it started, and leaves no scratch tree nor what was mounted in it', {
  timeout: 30_000,
}, async () => {
  // As debootstrap does: something mounted in the tree (its /proc), and a long command with a child of its own.
  const sleeper = ['sleep', '61.25'];
  let mounted = '';
  const slow: TemplateRecipe = {
    name: 'probe',
    description: 'a build that takes long',
    fingerprint: 'probe:slow',
    async build(root, _progress, { abort }) {
      mounted = path.join(root, 'proc');
      await mkdir(mounted, { recursive: true });
      await runCommand(['mount', '-t', 'tmpfs', 'probe-proc', mounted]);
      await runCommand(['sh', '-c', `${sleeper.join(' ')} & wait`], { abort });
    },
  };
  const store = new TemplateStore(volume, new Subvolumes(), [slow], { cacheDir: path.join(dataDir, 'cache'), debianMirror: null });
  const building = store.ensure('probe');
  for (const deadline = Date.now() + 10_000; processesRunning(sleeper).length === 0 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));
  assert.equal(processesRunning(sleeper).length, 1, 'the build runs');
  const started = Date.now();
  await store.stop();
  assert.ok(Date.now() - started < 5000, `stopped in ${Date.now() - started} ms, not after the build`);
  await assert.rejects(building, (err: SpaceError) => err.code === 'TEMPLATE_BUILD_FAILED' && /the node is stopping/.test(err.message));
  assert.deepEqual(processesRunning(sleeper), [], "the command's child was killed with it");
  assert.ok(!readFileSync('/proc/self/mounts', 'utf8').includes(mounted), 'nothing left mounted in the tree');
  assert.deepEqual(
    readdirSync(path.join(volume.mountPoint, 'templates')).filter((e) => e.startsWith('.build-probe-')),
    [],
    'the scratch tree deleted',
  );
  await assert.rejects(store.ensure('probe'), /not built: the node is stopping/);
});
