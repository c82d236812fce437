import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { writeInsideVolume } from './volume-paths.js';

test('a write into a volume never follows links the session left, at any level', async () => {
  const base = mkdtempSync(path.join(tmpdir(), 'space-volume-'));
  try {
    const outside = path.join(base, 'host');
    mkdirSync(outside);
    for (const layout of ['dir-link', 'nested-link', 'file-link']) {
      const rootfs = path.join(base, layout);
      mkdirSync(rootfs);
      if (layout === 'dir-link') symlinkSync(outside, path.join(rootfs, 'run'));
      if (layout === 'nested-link') {
        mkdirSync(path.join(rootfs, 'run'));
        symlinkSync(outside, path.join(rootfs, 'run/space'));
      }
      if (layout === 'file-link') {
        mkdirSync(path.join(rootfs, 'run/space'), { recursive: true });
        writeFileSync(path.join(outside, 'victim'), 'keep');
        symlinkSync(path.join(outside, 'victim'), path.join(rootfs, 'run/space/daemon-token'));
      }
      const file = await writeInsideVolume(rootfs, 'run/space/daemon-token', 'token', 0o600);
      assert.equal(file, path.join(rootfs, 'run/space/daemon-token'));
      assert.equal(readFileSync(file, 'utf8'), 'token');
      assert.ok(lstatSync(path.join(rootfs, 'run')).isDirectory() && lstatSync(path.join(rootfs, 'run/space')).isDirectory(), layout);
      assert.equal(lstatSync(file).mode & 0o777, 0o600);
    }
    assert.deepEqual(readdirSync(outside), ['victim'], 'nothing was written outside the volumes');
    assert.equal(readFileSync(path.join(outside, 'victim'), 'utf8'), 'keep');
    assert.ok(!existsSync(path.join(outside, 'daemon-token')));
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
