import assert from 'node:assert/strict';
import { open } from 'node:fs/promises';
import { test } from 'node:test';
import { errnoOf, hostErrorText } from './host-errors.js';

test('host errors: a system error says what it means and never its host path or a raw errno', async () => {
  const missing = await open('/nonexistent-space-dir/secret-host-path/file').catch((err: unknown) => err);
  assert.equal(errnoOf(missing), 'ENOENT');
  assert.equal(hostErrorText(missing), 'a file the node needs is missing (open)');
  // What Node gives for a write past a btrfs quota: libuv has no name for EDQUOT.
  const quota = Object.assign(
    new Error("Unknown system error -122: Unknown system error -122, open '/var/lib/space/btrfs/volumes/ses_x/run/space/daemon-token'"),
    {
      errno: -122,
      code: 'Unknown system error -122',
      syscall: 'open',
    },
  );
  assert.equal(errnoOf(quota), 'EDQUOT');
  assert.equal(hostErrorText(quota), "the session's disk is full (its diskGb limit) (open)");
  const odd = Object.assign(new Error('x'), { errno: -200, code: 'Unknown system error -200', syscall: 'write' });
  assert.equal(hostErrorText(odd), 'a system error on the node (errno 200) (write)');
  assert.equal(hostErrorText(new Error('the daemon did not answer')), 'the daemon did not answer');
});
