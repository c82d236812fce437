import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
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
