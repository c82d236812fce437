import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { installGatewayTrust } from '../gateway/sandbox-trust.js';
import { readInsideVolume, writeInsideVolume } from './volume-paths.js';

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

test("a new volume from a tenant's template trusts the gateway without reading or writing through the links its files hold", async () => {
  const base = mkdtempSync(path.join(tmpdir(), 'space-volume-'));
  try {
    const host = path.join(base, 'host');
    mkdirSync(path.join(host, 'certs'), { recursive: true });
    writeFileSync(path.join(host, 'certs/ca-certificates.crt'), 'HOST SECRET\n');
    writeFileSync(path.join(host, 'resolv.conf'), 'host resolver\n');
    const rootfs = path.join(base, 'rootfs');
    mkdirSync(path.join(rootfs, 'etc/ssl'), { recursive: true });
    symlinkSync(path.join(host, 'certs'), path.join(rootfs, 'etc/ssl/certs'));
    symlinkSync(path.join(host, 'resolv.conf'), path.join(rootfs, 'etc/resolv.conf'));
    assert.equal(await readInsideVolume(rootfs, 'etc/ssl/certs/ca-certificates.crt'), null, 'a linked directory on the way is not read through');
    await installGatewayTrust(rootfs, 'GATEWAY CA\n');
    assert.equal(readFileSync(path.join(rootfs, 'etc/ssl/certs/ca-certificates.crt'), 'utf8'), 'GATEWAY CA\n', 'the host file was not copied in');
    assert.ok(lstatSync(path.join(rootfs, 'etc/ssl/certs')).isDirectory() && lstatSync(path.join(rootfs, 'etc/resolv.conf')).isFile());
    assert.equal(readFileSync(path.join(host, 'certs/ca-certificates.crt'), 'utf8'), 'HOST SECRET\n', 'nor overwritten');
    assert.equal(readFileSync(path.join(host, 'resolv.conf'), 'utf8'), 'host resolver\n');
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
