import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openSqliteStore } from '../store/open-store.js';
import type { CheckpointRow, SessionRow } from '../store/store.js';
import { MovingVolumes } from './moving-volumes.js';

const mount = (volumeId: string, readOnly = false) => ({ volumeId, name: volumeId.replace('vol_', ''), path: `/${volumeId}`, readOnly });

test('a session moves with the read-write volumes it alone mounts; a read-only mount, or one another session shares, keeps it on its node, named', async () => {
  const store = await openSqliteStore(':memory:');
  const volumes = new MovingVolumes(store);
  const alone = { id: 'ses_alone', volumes: [mount('vol_writes00001')] } as SessionRow;
  await volumes.refuseIfPinned(alone, 'its node is being drained');
  assert.deepEqual(volumes.taken(alone), ['vol_writes00001']);

  const reader = { id: 'ses_reader', volumes: [mount('vol_dataset0001', true)] } as SessionRow;
  await assert.rejects(volumes.refuseIfPinned(reader, 'its node is being drained'), {
    code: 'VOLUME_UNAVAILABLE',
    message: /session ses_reader cannot move \(its node is being drained\): volume dataset0001 is mounted read-only, it has no copy in the checkpoints/,
  });

  await store.claimVolumeMounts([{ sessionId: 'ses_writer', volumeId: 'vol_shared00001', path: '/s', readOnly: false }]);
  await store.claimVolumeMounts([{ sessionId: 'ses_other', volumeId: 'vol_shared00001', path: '/s', readOnly: true }]);
  const writer = { id: 'ses_writer', volumes: [mount('vol_shared00001')] } as SessionRow;
  await assert.rejects(volumes.refuseIfPinned(writer, 'node n1, which holds it, is lost'), {
    code: 'VOLUME_UNAVAILABLE',
    message: /volume shared00001 is also mounted by ses_other/,
  });
});

test('a checkpoint is one to move on from only with a shipped copy of each volume taken along', async () => {
  const volumes = new MovingVolumes(await openSqliteStore(':memory:'));
  const row = { id: 'ses_one', volumes: [mount('vol_writes00001'), mount('vol_dataset0001', true)] } as SessionRow;
  const shipped = (objects: { key: string; volumeId?: string }[]) =>
    ({ shippedObjects: objects.map((o) => ({ ...o, bytes: 1, sha256: '0'.repeat(64) })) }) as CheckpointRow;
  assert.equal(volumes.missingCopies(row, shipped([{ key: 'checkpoints/ckp_a.send' }])), 'no copy of volume(s) writes00001 in the object store');
  assert.equal(
    volumes.missingCopies(row, shipped([{ key: 'checkpoints/ckp_a.send' }, { key: 'checkpoints/ckp_a.vol_writes00001.send', volumeId: 'vol_writes00001' }])),
    null,
  );
});
