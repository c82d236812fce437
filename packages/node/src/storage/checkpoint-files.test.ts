import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buffer } from 'node:stream/consumers';
import { test } from 'node:test';
import { ErrorCode, isSpaceError } from '@space/protocol';
import { CheckpointFiles } from './checkpoint-files.js';

/** Two checkpoints' roots as a sandbox's filesystem would have them, with what a hostile session leaves behind. */
function checkpoints(t: { after: (fn: () => void) => void }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-checkpoint-files-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const roots = new Map<string, string>();
  for (const id of ['ckp_first1', 'ckp_second']) {
    const root = path.join(dir, id);
    for (const sub of ['etc', 'workspace/app', 'dev', 'tmp']) mkdirSync(path.join(root, sub), { recursive: true });
    writeFileSync(path.join(root, 'etc/hostname'), 'sandbox\n');
    writeFileSync(path.join(root, 'workspace/app/config.yaml'), id === 'ckp_first1' ? 'mode: good\n' : 'mode: broken\n');
    // Links a session could leave: to the host's files, out through `..`, a loop, a chain.
    symlinkSync('/etc/shadow', path.join(root, 'workspace/shadow'));
    symlinkSync('../../../../../../..', path.join(root, 'workspace/up'));
    symlinkSync('/etc', path.join(root, 'workspace/etc-link'));
    symlinkSync('loop-b', path.join(root, 'workspace/loop-a'));
    symlinkSync('loop-a', path.join(root, 'workspace/loop-b'));
    symlinkSync('app/config.yaml', path.join(root, 'workspace/config'));
    execFileSync('mkfifo', [path.join(root, 'tmp/fifo')]);
    // A name that is not UTF-8, as a session can make one.
    writeFileSync(Buffer.concat([Buffer.from(`${root}/tmp/`), Buffer.from([0xff, 0xfe])]), 'x');
    execFileSync('mknod', [path.join(root, 'dev/null'), 'c', '1', '3']);
    roots.set(id, root);
  }
  rmSync(path.join(roots.get('ckp_second')!, 'etc/hostname'));
  return new CheckpointFiles(async (id) => roots.get(id) ?? null);
}

const refused = (code: string, message?: RegExp) => (err: unknown) => isSpaceError(err) && err.code === code && (!message || message.test(err.message));
const read = async (files: CheckpointFiles, id: string, p: string) => (await buffer((await files.read(id, p)).stream)).toString();

test("a checkpoint's symlinks resolve inside it, never on the host: absolute targets, .. past the root, loops", async (t) => {
  const files = checkpoints(t);
  // The host's /etc/shadow exists; the checkpoint's does not.
  await assert.rejects(files.read('ckp_first1', '/workspace/shadow'), refused(ErrorCode.FILE_NOT_FOUND));
  await assert.rejects(files.stat('ckp_first1', '/workspace/shadow/x'), refused(ErrorCode.FILE_NOT_FOUND));
  assert.equal(await read(files, 'ckp_first1', '/workspace/up/etc/hostname'), 'sandbox\n', '`..` stops at the checkpoint root');
  assert.equal(await read(files, 'ckp_first1', '/workspace/etc-link/hostname'), 'sandbox\n', "an absolute target is the checkpoint's /etc");
  assert.equal((await files.list('ckp_first1', '/workspace/up')).path, '/');
  assert.deepEqual(
    (await files.list('ckp_first1', '/workspace/etc-link')).entries.map((e) => e.path),
    ['/etc/hostname'],
  );
  await assert.rejects(files.read('ckp_first1', '/workspace/loop-a'), refused(ErrorCode.VALIDATION_FAILED, /more than 40 symbolic links/));
  assert.equal(await read(files, 'ckp_first1', '/workspace/config'), 'mode: good\n', 'a relative link inside');
  assert.equal(await read(files, 'ckp_second', '/workspace/config'), 'mode: broken\n');
});

test('only regular files are read: a FIFO or a device is refused at once, a directory is listed instead', async (t) => {
  const files = checkpoints(t);
  await assert.rejects(files.read('ckp_first1', '/tmp/fifo'), refused(ErrorCode.VALIDATION_FAILED, /not a regular file/));
  await assert.rejects(files.read('ckp_first1', '/dev/null'), refused(ErrorCode.VALIDATION_FAILED, /not a regular file/));
  await assert.rejects(files.read('ckp_first1', '/workspace'), refused(ErrorCode.IS_A_DIRECTORY));
  await assert.rejects(files.list('ckp_first1', '/etc/hostname'), refused(ErrorCode.NOT_A_DIRECTORY));
  await assert.rejects(files.read('ckp_first1', '/etc/hostname/x'), refused(ErrorCode.NOT_A_DIRECTORY));
  await assert.rejects(files.read('ckp_gone00', '/etc/hostname'), refused(ErrorCode.CHECKPOINT_NOT_FOUND));

  const tmp = await files.list('ckp_first1', '/tmp');
  assert.deepEqual(
    tmp.entries.map((e) => [e.name, e.type]),
    [
      ['fifo', 'other'],
      ['\ufffd\ufffd', 'other'],
    ],
    'a FIFO, and a name that is not UTF-8, listed without failing the list',
  );
  const link = await files.stat('ckp_first1', '/workspace/shadow');
  assert.deepEqual([link.type, link.target], ['symlink', '/etc/shadow'], 'a link is described, not followed');
  const config = await files.stat('ckp_first1', 'workspace/app/config.yaml');
  assert.deepEqual([config.path, config.name, config.type, config.size], ['/workspace/app/config.yaml', 'config.yaml', 'file', 11]);
});

test("a path's versions: stat and sha256 in each checkpoint held here, missing ones as such, others left out", async (t) => {
  const files = checkpoints(t);
  const versions = await files.versions(['ckp_first1', 'ckp_second', 'ckp_gone00'], '/etc/hostname');
  const sha256 = createHash('sha256').update('sandbox\n').digest('hex');
  assert.deepEqual(
    versions.map((v) => [v.checkpointId, v.stat?.size ?? null, v.sha256]),
    [
      ['ckp_first1', 8, sha256],
      ['ckp_second', null, null],
    ],
  );
  const config = await files.versions(['ckp_first1', 'ckp_second'], '/workspace/config');
  assert.deepEqual(
    config.map((v) => v.stat?.type),
    ['symlink', 'symlink'],
    'the link itself, as stat describes it',
  );
});
