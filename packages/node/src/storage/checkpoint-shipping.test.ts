import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { Transform } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { DataKey, ShipBase } from '@space/protocol';
import type { Logger } from '../logger.js';
import { startLoopbackS3 } from './loopback-s3.js';
import { BtrfsVolume } from './btrfs-volume.js';
import { CheckpointShipping } from './checkpoint-shipping.js';
import { CheckpointStore } from './checkpoint-store.js';
import { FileObjectStore, type ObjectStore, S3ObjectStore } from './object-store.js';
import { Subvolumes } from './subvolumes.js';

// Two "nodes" (each a real btrfs filesystem in a loop-mounted image) sharing an object store: a
// directory, then a loopback S3 server.
const quiet: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const scratch = mkdtempSync(path.join(tmpdir(), 'space-shipping-'));
const subvolumes = new Subvolumes();
const volumes = ['a', 'b'].map((n) => new BtrfsVolume(path.join(scratch, n), 1));
let s3: Awaited<ReturnType<typeof startLoopbackS3>>;

before(async () => {
  for (const v of volumes) await v.mount();
  s3 = await startLoopbackS3();
});
after(async () => {
  for (const v of volumes) await v.unmount();
  await s3?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

function node(volume: BtrfsVolume, objects: ObjectStore) {
  const checkpoints = new CheckpointStore(volume, subvolumes);
  const warnings: string[] = [];
  const log: Logger = { ...quiet, warn: (m: string) => void warnings.push(m) };
  return { volume, checkpoints, warnings, shipping: new CheckpointShipping({ volume, checkpoints, subvolumes, objects, log }) };
}

const stores: [string, () => ObjectStore][] = [
  ['a directory', () => new FileObjectStore(path.join(scratch, 'objects'))],
  [
    'S3 (s3rver)',
    () =>
      new S3ObjectStore({
        bucket: s3.bucket,
        prefix: 'cluster-1',
        endpoint: s3.endpoint,
        forcePathStyle: true,
        credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      }),
  ],
];

/** The tenant's data key, as the control plane sends it with each call. */
const dataKey: DataKey = { id: 'dk_shippingtest', key: randomBytes(32).toString('base64') };

/** Whether `text` appears in any stored object's raw bytes (as the store holds them, sealed or not). */
async function anyObjectHolds(objects: ObjectStore, keys: string[], text: string): Promise<boolean> {
  for (const key of keys) if ((await buffer(await objects.get(key))).includes(text)) return true;
  return false;
}

/** The spreading prefix of an object's key: two hex digits of its checkpoint's or base's id's sha256. */
const spread = (id: string) => createHash('sha256').update(id).digest('hex').slice(0, 2);

let n = 0;
const id = (prefix: string) => `${prefix}_${String(++n).padStart(8, '0')}${randomBytes(3).toString('hex')}`;

for (const [name, makeStore] of stores) {
  test(`${name}: a checkpoint stored as a difference to its base is restored on another node, byte for byte, memory image included`, async () => {
    const objects = makeStore();
    const [a, b] = volumes.map((v) => node(v, objects));
    const session = id('ses');
    const volume = a!.volume.dir('volumes', session);
    await subvolumes.create(volume);
    await writeFile(path.join(volume, 'big'), randomBytes(4 * 2 ** 20));
    // Bytes to look for in the store: a file's known content, and a secret's placeholder held in memory.
    const known = `SPACE-KNOWN-BYTES-${randomBytes(6).toString('hex')}`;
    const placeholder = `space-secret-placeholder-${randomBytes(6).toString('hex')}`;
    await writeFile(path.join(volume, 'notes.txt'), known.repeat(100));
    // A read-write volume the session mounts: each checkpoint holds a copy of it.
    const volumeId = `vol_${randomBytes(6).toString('hex')}`;
    const named = a!.volume.dir('named-volumes', volumeId);
    await mkdir(path.dirname(named), { recursive: true });
    await subvolumes.create(named);
    await writeFile(path.join(named, 'data'), randomBytes(2 * 2 ** 20));
    const take = async (checkpointId: string): Promise<void> => {
      await a!.checkpoints.take(volume, checkpointId);
      await a!.checkpoints.copyVolumes(checkpointId, new Map([[volumeId, named]]));
    };
    const first = id('ckp');
    await take(first);
    const baseId = id('bse');
    const base: ShipBase = await a!.shipping.createBase(baseId, first, dataKey);
    assert.ok(base.object.bytes > 4 * 2 ** 20, 'the base holds everything');
    assert.deepEqual(
      base.volumes?.map((o) => [o.key, o.volumeId]),
      [[`bases/${spread(baseId)}/${baseId}.${volumeId}.send`, volumeId]],
    );
    assert.ok(base.volumes![0]!.bytes > 2 * 2 ** 20, "the base holds the volume's copy whole");

    await writeFile(path.join(volume, 'small'), 'written after the base');
    await writeFile(path.join(named, 'note'), 'in the volume after the base');
    const second = id('ckp');
    await take(second);
    // A memory image as a full checkpoint leaves one.
    await mkdir(a!.checkpoints.partialImageDir(second), { recursive: true });
    await writeFile(path.join(a!.checkpoints.partialImageDir(second), 'pages.img'), Buffer.concat([randomBytes(64 * 1024), Buffer.from(placeholder)]));
    await a!.checkpoints.commitImage(second, { token: 'tok', runtimeDir: '/runtime/x', addresses: ['10.213.0.2', '10.213.0.6'] });
    const shipped = await a!.shipping.ship(second, base, dataKey);
    assert.deepEqual(
      shipped.map((o) => o.key),
      [`${second}.send`, `${second}.${volumeId}.send`, `${second}.memory.tar`].map((name) => `checkpoints/${spread(second)}/${name}`),
    );
    assert.ok(shipped[0]!.bytes < 64 * 1024, `only the difference is stored: ${shipped[0]!.bytes} bytes`);
    assert.ok(shipped[1]!.bytes < 64 * 1024, `of the volume's copy too: ${shipped[1]!.bytes} bytes`);
    assert.ok(
      [base.object, ...base.volumes!, ...shipped].every((o) => o.dataKeyId === dataKey.id),
      'every object is sealed with the data key',
    );
    const keys = [base.object, ...shipped].map((o) => o.key);
    assert.equal(await anyObjectHolds(objects, keys, known), false, "none of the file's bytes is in the store");
    assert.equal(await anyObjectHolds(objects, keys, placeholder), false, "nor the memory image's secret placeholder");
    // Under another tenant's key nothing is received.
    const otherKey: DataKey = { id: 'dk_another', key: randomBytes(32).toString('base64') };
    await assert.rejects(b!.shipping.fetch(second, base, shipped, otherKey), { code: 'OBJECT_CORRUPT', message: /sealed with data key dk_shippingtest/ });
    assert.deepEqual(b!.warnings, [], 'another key is refused once, not read again');

    await b!.shipping.fetch(second, base, shipped, dataKey);
    await b!.shipping.fetch(second, base, shipped, dataKey); // a second fetch finds it there
    const restored = b!.volume.dir('volumes', session);
    await b!.checkpoints.materialize(second, restored);
    assert.deepEqual(readFileSync(path.join(restored, 'big')), readFileSync(path.join(volume, 'big')));
    assert.equal(readFileSync(path.join(restored, 'small'), 'utf8'), 'written after the base');
    assert.equal(readFileSync(path.join(restored, 'notes.txt'), 'utf8'), known.repeat(100));
    assert.deepEqual((await b!.checkpoints.image(second))?.meta, (await a!.checkpoints.image(second))?.meta);
    assert.deepEqual((await b!.checkpoints.image(second))?.meta.addresses, ['10.213.0.2', '10.213.0.6'], 'with the addresses its sockets may hold');
    assert.deepEqual(await b!.checkpoints.volumeCopies(second), [volumeId]);
    const copy = b!.checkpoints.volumeCopyPath(second, volumeId);
    assert.deepEqual(readFileSync(path.join(copy, 'data')), readFileSync(path.join(named, 'data')));
    assert.equal(readFileSync(path.join(copy, 'note'), 'utf8'), 'in the volume after the base');
    // A base without a copy of a volume the checkpoint holds is refused: the control plane makes a new one.
    await assert.rejects(a!.shipping.ship(second, { id: base.id, object: base.object }, dataKey), {
      code: 'OBJECT_NOT_FOUND',
      message: new RegExp(`holds no copy of volume\\(s\\) ${volumeId}`),
    });

    // The session now lives on b: its next checkpoint goes out from there against the same base, and a gets it back.
    await writeFile(path.join(restored, 'on-b'), 'b was here');
    const third = id('ckp');
    await b!.checkpoints.take(restored, third);
    const fromB = await b!.shipping.ship(third, base, dataKey);
    await a!.shipping.fetch(third, base, fromB, dataKey);
    assert.equal(readFileSync(path.join(a!.checkpoints.path(third), 'on-b'), 'utf8'), 'b was here');
    await b!.shipping.deleteObjects([...shipped, ...fromB, base.object, ...base.volumes!].map((o) => o.key));
    await assert.rejects(objects.get(base.object.key), { code: 'OBJECT_NOT_FOUND' });
    await b!.shipping.deleteBase(base.id);
    assert.equal(existsSync(`${path.join(b!.volume.dir('bases'), base.id)}.volumes`), false, "the base's volume copies go with it");
  });
}

test('a corrupt or missing object is refused and leaves nothing on the node', async () => {
  const objects = new FileObjectStore(path.join(scratch, 'objects-corrupt'));
  const [a, b] = volumes.map((v) => node(v, objects));
  const volume = a!.volume.dir('volumes', id('ses'));
  await subvolumes.create(volume);
  await writeFile(path.join(volume, 'file'), randomBytes(256 * 1024));
  const checkpoint = id('ckp');
  await a!.checkpoints.take(volume, checkpoint);
  const baseId = id('bse');
  const base: ShipBase = await a!.shipping.createBase(baseId, checkpoint, dataKey);
  const shipped = await a!.shipping.ship(checkpoint, base, dataKey);
  // One byte of the base changed in the store: its chunk fails its check, and nothing of it reaches btrfs.
  const file = path.join(scratch, 'objects-corrupt', base.object.key);
  const bytes = readFileSync(file);
  bytes[bytes.length - 100] ^= 0xff;
  await writeFile(file, bytes);
  await assert.rejects(b!.shipping.fetch(checkpoint, base, shipped, dataKey), { code: 'OBJECT_CORRUPT', message: /fails its check at chunk \d+: altered/ });
  assert.equal(existsSync(b!.checkpoints.path(checkpoint)), false);
  assert.equal(existsSync(path.join(b!.volume.dir('bases'), baseId)), false, 'no half-received base is left');
  // A store that serves less than it stored (s3rver did, answering before its file was whole): the
  // stream ends mid-command and btrfs refuses it, and the error says the object was short.
  bytes[bytes.length - 100] ^= 0xff;
  await writeFile(file, bytes.subarray(0, bytes.length - 7));
  await assert.rejects(b!.shipping.fetch(checkpoint, base, shipped, dataKey), {
    code: 'OBJECT_CORRUPT',
    message: new RegExp(`read back as ${bytes.length - 7} bytes .* not the ${bytes.length} `),
  });
  assert.equal(existsSync(path.join(b!.volume.dir('bases'), baseId)), false, 'no half-received base is left');
  // With the base whole again, a checkpoint whose object is gone is refused as missing.
  await writeFile(file, bytes);
  const gone = id('ckp');
  await assert.rejects(b!.shipping.fetch(gone, base, [{ key: `checkpoints/${gone}.send`, bytes: 1, sha256: '0'.repeat(64) }], dataKey), {
    code: 'OBJECT_NOT_FOUND',
  });
  assert.equal(existsSync(b!.checkpoints.path(gone)), false);
});

test('without an object store every operation says which setting is missing', async () => {
  const checkpoints = new CheckpointStore(volumes[0]!, subvolumes);
  const shipping = new CheckpointShipping({ volume: volumes[0]!, checkpoints, subvolumes, objects: null, log: quiet });
  await assert.rejects(shipping.createBase(id('bse'), id('ckp'), dataKey), { code: 'OBJECT_STORE_UNAVAILABLE', message: /SPACE_OBJECT_STORE/ });
});

test('at start, what an interrupted receive left (a writable subvolume) is removed; complete checkpoints and bases stay', async () => {
  const { volume, checkpoints, shipping } = node(volumes[1]!, new FileObjectStore(path.join(scratch, 'objects-partial')));
  const source = volume.dir('volumes', id('ses'));
  await subvolumes.create(source);
  const whole = id('ckp');
  await checkpoints.take(source, whole);
  await mkdir(volume.dir('bases'), { recursive: true });
  const halfCheckpoint = volume.dir('checkpoints', id('ckp'));
  const halfBase = volume.dir('bases', id('bse'));
  // A volume's copy received halfway, next to a complete one.
  const wholeCopy = checkpoints.volumeCopyPath(whole, 'vol_complete0001');
  const halfCopy = checkpoints.volumeCopyPath(whole, 'vol_halfway00001');
  await mkdir(path.dirname(halfCopy), { recursive: true });
  await subvolumes.snapshot(source, wholeCopy, { readOnly: true });
  for (const half of [halfCheckpoint, halfBase, halfCopy]) await subvolumes.create(half);
  assert.equal(await shipping.removePartialReceives(), 3);
  assert.deepEqual(
    [halfCheckpoint, halfBase, halfCopy, checkpoints.path(whole), wholeCopy].map((p) => existsSync(p)),
    [false, false, false, true, true],
  );
});

/** The pid of this process's child whose command line holds every one of `words`, once it runs. */
async function childRunning(words: string[]): Promise<number> {
  for (let i = 0; i < 100; i++) {
    for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
      let cmdline = '';
      let parent = -1;
      try {
        cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
        parent = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      } catch {
        continue;
      }
      if (parent === process.pid && words.every((w) => cmdline.includes(w))) return Number(entry);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no child running ${words.join(' ')}`);
}

test('a read of the store that breaks off is tried again: the checkpoint arrives whole, and the first failure says how far it got', async () => {
  const objects = new FileObjectStore(path.join(scratch, 'objects-flaky'));
  const a = node(volumes[0]!, objects);
  const volume = a.volume.dir('volumes', id('ses'));
  await subvolumes.create(volume);
  const content = randomBytes(512 * 1024);
  await writeFile(path.join(volume, 'file'), content);
  const checkpoint = id('ckp');
  await a.checkpoints.take(volume, checkpoint);
  const baseId = id('bse');
  const base: ShipBase = await a.shipping.createBase(baseId, checkpoint, dataKey);
  const shipped = await a.shipping.ship(checkpoint, base, dataKey);
  // The base's first read breaks off after 64 KiB, as a reset connection would.
  let broken = false;
  const flaky: ObjectStore = {
    description: 'a store whose first read breaks off',
    put: (key, body) => objects.put(key, body),
    delete: (key) => objects.delete(key),
    get: async (key) => {
      const whole = await objects.get(key);
      if (broken || key !== base.object.key) return whole;
      broken = true;
      let sent = 0;
      return whole.pipe(
        new Transform({
          transform(chunk: Buffer, _encoding, done) {
            sent += chunk.length;
            done(sent > 64 * 1024 ? new Error('read ECONNRESET') : null, chunk);
          },
        }),
      );
    },
  };
  const warnings: string[] = [];
  const checkpointsB = new CheckpointStore(volumes[1]!, subvolumes);
  const shippingB = new CheckpointShipping({
    volume: volumes[1]!,
    checkpoints: checkpointsB,
    subvolumes,
    objects: flaky,
    log: { ...quiet, warn: (m) => void warnings.push(m) },
  });
  await shippingB.fetch(checkpoint, base, shipped, dataKey);
  assert.ok(broken, 'the first read broke off');
  assert.equal(warnings.length, 1, warnings.join('\n'));
  assert.match(warnings[0]!, /attempt 1 of 3.*bytes of bases\/.* read; the read broke off: read ECONNRESET/);
  assert.ok(readFileSync(path.join(checkpointsB.path(checkpoint), 'file')).equals(content), 'the checkpoint arrived whole');
});

/** A node whose store is slow to start reading (a send's child fills its pipe and waits meanwhile), and a checkpoint of 8 MiB on it. */
async function sendToASlowStore(dir: string) {
  const inner = new FileObjectStore(path.join(scratch, dir));
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const slow: ObjectStore = {
    description: 'a slow store',
    put: async (key, body) => (await held, inner.put(key, body)),
    get: (key) => inner.get(key),
    delete: (key) => inner.delete(key),
  };
  const a = node(volumes[0]!, slow);
  const volume = a.volume.dir('volumes', id('ses'));
  await subvolumes.create(volume);
  await writeFile(path.join(volume, 'big'), randomBytes(8 * 2 ** 20));
  const checkpoint = id('ckp');
  await a.checkpoints.take(volume, checkpoint);
  return { a, checkpoint, release };
}

test('a stopping node ends the sends under way (they hold its storage busy) and starts none after', async () => {
  const { a, checkpoint, release } = await sendToASlowStore('objects-stopped');
  const shipping = a.shipping.createBase(id('bse'), checkpoint, dataKey);
  shipping.catch(() => undefined);
  const pid = await childRunning(['btrfs', 'send']);
  await a.shipping.stop();
  assert.equal(existsSync(`/proc/${pid}/cmdline`) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('btrfs'), false, 'the send has ended');
  release();
  await assert.rejects(shipping, /btrfs send of .* failed/);
  await assert.rejects(a.shipping.createBase(id('bse'), checkpoint, dataKey), { code: 'NODE_UNAVAILABLE', message: /stopping/ });
});

test('a btrfs send that a Ctrl-C ends while its object is being stored fails the shipment cleanly, never the node', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const { a, checkpoint, release } = await sendToASlowStore('objects-interrupted');
    const baseId = id('bse');
    const shipping = a.shipping.createBase(baseId, checkpoint, dataKey);
    process.kill(await childRunning(['btrfs', 'send', baseId]), 'SIGINT');
    await new Promise((r) => setTimeout(r, 300));
    release();
    await assert.rejects(shipping, /btrfs send of .* failed \(exit null\)/);
    assert.deepEqual(unhandled, [], 'no rejection went unhandled');
    assert.ok(!existsSync(path.join(scratch, 'objects-interrupted', `bases/${baseId}.send`)), 'nothing of the object is kept');
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});
