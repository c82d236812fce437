import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { findAptMirror } from './apt-mirror.js';

test('the mirror comes from apt: deb822 files, one-line files, never a fixed host', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-apt-'));
  try {
    mkdirSync(path.join(dir, 'sources.list.d'));
    writeFileSync(
      path.join(dir, 'sources.list.d', 'debian.sources'),
      'Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\nTypes: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n',
    );
    assert.equal(await findAptMirror('bookworm', dir), 'http://mirror.example/debian');
    writeFileSync(path.join(dir, 'sources.list'), 'deb [arch=amd64] http://other.example/debian bookworm main\n');
    assert.equal(await findAptMirror('bookworm', dir), 'http://other.example/debian');
    await assert.rejects(findAptMirror('trixie', dir), /no apt source for Debian trixie/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
