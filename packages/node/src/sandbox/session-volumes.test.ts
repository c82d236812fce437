import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { consoleLogger } from '../logger.js';
import { BtrfsVolume } from '../storage/btrfs-volume.js';
import { Subvolumes } from '../storage/subvolumes.js';
import type { TemplateStore } from '../templates/template-store.js';
import { SessionVolumes } from './session-volumes.js';

// A real btrfs filesystem in a loop-mounted image (needs root, as SPACE does).
const dataDir = mkdtempSync(path.join(tmpdir(), 'space-volumes-'));
const volume = new BtrfsVolume(dataDir, 2);
const subvolumes = new Subvolumes();
const volumes = new SessionVolumes(volume, subvolumes, null as unknown as TemplateStore, '', consoleLogger('test', true));

before(() => volume.mount());
after(async () => {
  await volume.unmount();
  rmSync(dataDir, { recursive: true, force: true });
});

async function subvolumeWith(dir: string, content: string): Promise<void> {
  await subvolumes.create(dir);
  await writeFile(path.join(dir, 'file'), content);
}

test('after a crash, a restore whose old volume was already deleted is finished; other staging copies are removed', async () => {
  // Crash before the old volume was deleted: the volume is whole, the staging copy goes.
  await subvolumeWith(volumes.path('ses_whole00001'), 'current');
  await subvolumeWith(`${volumes.path('ses_whole00001')}.restoring`, 'restored');
  // Crash between deleting the old volume and renaming the complete copy into its place.
  await subvolumeWith(`${volumes.path('ses_halfway001')}.restoring`, 'restored');

  assert.equal(await volumes.removeLeftovers(), 2);
  assert.equal(readFileSync(path.join(volumes.path('ses_whole00001'), 'file'), 'utf8'), 'current');
  assert.equal(readFileSync(path.join(volumes.path('ses_halfway001'), 'file'), 'utf8'), 'restored');
  assert.equal(await subvolumes.exists(`${volumes.path('ses_whole00001')}.restoring`), false);
  assert.equal(await subvolumes.exists(`${volumes.path('ses_halfway001')}.restoring`), false);
});

test("a session's disk limit stops writes with EDQUOT; lifting it lets them through", async () => {
  await subvolumes.create(volumes.path('ses_disk000001'));
  await volumes.limitDisk('ses_disk000001', 0.1);
  const handle = await open(path.join(volumes.path('ses_disk000001'), 'big'), 'w');
  const chunk = Buffer.alloc(1024 * 1024, 1).map(() => Math.floor(Math.random() * 256));
  let written = 0;
  try {
    await assert.rejects(
      async () => {
        for (let i = 0; i < 200; i++) {
          await handle.write(chunk);
          await handle.sync();
          written += chunk.length;
        }
      },
      { errno: -122 },
    ); // EDQUOT (libuv has no name for it)
  } finally {
    await handle.close();
  }
  // btrfs checks the limit before each write, so the one that crosses it may complete: a few MiB over at most.
  assert.ok(written < 0.1 * 1024 ** 3 + 4 * 1024 ** 2 && written > 50 * 1024 ** 2, `${written} bytes written under a 0.1 GB limit`);
  await volumes.limitDisk('ses_disk000001', undefined);
  await writeFile(path.join(volumes.path('ses_disk000001'), 'more'), chunk);
});
