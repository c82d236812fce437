import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { controlPlaneSettings } from '@space/control-plane';
import { nodeSettings } from '@space/node';
import { type Setting, sharedSettings } from '@space/server-kit';
import { clientSettings } from './client-settings.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const tables = { sharedSettings, controlPlaneSettings, nodeSettings, clientSettings };

test('docs/configuration.md is generated from the current settings', () => {
  const check = spawnSync(process.execPath, [path.join(root, 'scripts/configuration.mjs'), '--check'], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stderr);
});

test('each setting is declared once, and the tables `space up` merges share no key', () => {
  const declared = new Map<string, Setting<unknown>>();
  const twice: string[] = [];
  for (const table of Object.values(tables))
    for (const s of Object.values(table) as Setting<unknown>[]) {
      const seen = declared.get(s.name);
      if (seen && seen !== s) twice.push(s.name);
      declared.set(s.name, s);
    }
  assert.deepEqual(twice, []);
  const keys = [sharedSettings, controlPlaneSettings, nodeSettings].flatMap((t) => Object.keys(t));
  assert.deepEqual(
    keys.filter((k, i) => keys.indexOf(k) !== i),
    [],
  );
});

test('no process reads a SPACE_ variable but through its settings', () => {
  const readers: string[] = [];
  for (const pkg of ['control-plane', 'node', 'cli', 'server-kit']) {
    const src = path.join(root, 'packages', pkg, 'src');
    for (const file of readdirSync(src, { recursive: true, encoding: 'utf8' })) {
      if (!file.endsWith('.ts') || file.endsWith('.test.ts')) continue;
      const text = readFileSync(path.join(src, file), 'utf8');
      for (const [read] of text.matchAll(/env(\.|\[['"])SPACE_\w+/g)) readers.push(`${pkg}/src/${file}: ${read}`);
    }
  }
  assert.deepEqual(readers, []);
});

test('a bad setting stops `space up` and `space node` before they touch anything, naming each bad one', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-settings-'));
  try {
    const dataDir = path.join(dir, 'data');
    const cli = path.join(root, 'packages/cli/dist/main.js');
    const env = { PATH: process.env.PATH, SPACE_DATA_DIR: dataDir, SPACE_POOL_SIZE: 'many', SPACE_MAINTENANCE_TICK_MS: '0' };
    const up = spawnSync(process.execPath, [cli, 'up'], { env, encoding: 'utf8', timeout: 30_000 });
    assert.equal(up.status, 1);
    assert.match(
      up.stderr,
      /2 settings are wrong: SPACE_MAINTENANCE_TICK_MS must be a whole number from 1, got "0"; SPACE_POOL_SIZE must be a whole number from 0, got "many"/,
    );
    const node = spawnSync(process.execPath, [cli, 'node'], { env: { ...env, SPACE_RUNSC_PLATFORM: 'kvm' }, encoding: 'utf8', timeout: 30_000 });
    assert.equal(node.status, 1);
    assert.match(node.stderr, /SPACE_RUNSC_PLATFORM must be one of ptrace, systrap, got "kvm"/);
    assert.equal(existsSync(dataDir), false, 'nothing was created');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
