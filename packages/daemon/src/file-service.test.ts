import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { FileService } from './file-service.js';
import { SandboxPaths } from './sandbox-paths.js';

const root = mkdtempSync(path.join(tmpdir(), 'space-files-'));
const files = new FileService(new SandboxPaths(root));
test.after(() => rmSync(root, { recursive: true, force: true }));

test('an upload over the limit fails and leaves neither the file nor a temporary behind', async () => {
  const big = Readable.from([Buffer.alloc(600), Buffer.alloc(600)]);
  await assert.rejects(files.write('d/too-big', big, 1000), { code: 'PAYLOAD_TOO_LARGE' });
  assert.deepEqual(readdirSync(path.join(root, 'd')), []);
});

test('write then stat, list, move, remove', async () => {
  const stat = await files.write('a/b.txt', Readable.from([Buffer.from('hello')]), 1000);
  assert.deepEqual([stat.type, stat.size, stat.path], ['file', 5, path.join(root, 'a/b.txt')]);
  assert.deepEqual(
    (await files.list('a')).entries.map((e) => e.name),
    ['b.txt'],
  );
  await files.move('a/b.txt', 'c/d.txt', { overwrite: false });
  await assert.rejects(files.stat('a/b.txt'), { code: 'FILE_NOT_FOUND' });
  await assert.rejects(files.openRead('c'), { code: 'IS_A_DIRECTORY' });
  await assert.rejects(files.remove('c', { recursive: false }), { code: 'DIRECTORY_NOT_EMPTY' });
  await files.remove('c', { recursive: true });
  await assert.rejects(files.list('c'), { code: 'FILE_NOT_FOUND' });
});

test('moving / or a directory into itself is refused; a move across file systems copies and removes, like mv', async () => {
  await assert.rejects(files.move('/', 'elsewhere', { overwrite: false }), { code: 'INVALID_PATH' });
  await files.write('tree/x.txt', Readable.from([Buffer.from('x')]), 1000);
  await assert.rejects(files.move('tree', 'tree/inner', { overwrite: false }), { code: 'INVALID_PATH' });
  // /dev/shm is a tmpfs: rename(2) from there into the test directory fails with EXDEV.
  const other = mkdtempSync('/dev/shm/space-move-');
  try {
    writeFileSync(path.join(other, 'a.txt'), 'across');
    await files.move(path.join(other, 'a.txt'), 'moved/a.txt', { overwrite: false });
    assert.equal(readFileSync(path.join(root, 'moved/a.txt'), 'utf8'), 'across');
    assert.equal(existsSync(path.join(other, 'a.txt')), false);
    writeFileSync(path.join(other, 'a.txt'), 'newer');
    await assert.rejects(files.move(path.join(other, 'a.txt'), 'moved/a.txt', { overwrite: false }), { code: 'FILE_EXISTS' });
    await files.move(path.join(other, 'a.txt'), 'moved/a.txt', { overwrite: true });
    assert.equal(readFileSync(path.join(root, 'moved/a.txt'), 'utf8'), 'newer');
  } finally {
    rmSync(other, { recursive: true, force: true });
  }
});
