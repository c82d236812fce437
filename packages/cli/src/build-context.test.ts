import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { readBuildContext } from './build-context.js';

test('a build context: what .dockerignore leaves out is neither read nor counted; one too big names its biggest directories', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-context-test-'));
  try {
    const write = (name: string, bytes: number, mode = 0o644) => {
      mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
      writeFileSync(path.join(dir, name), Buffer.alloc(bytes, 1), { mode });
    };
    write('src/main.py', 100);
    write('src/run.sh', 100, 0o755);
    write('node_modules/big/blob', 3000);
    write('node_modules/keep/README', 300);
    write('.git/objects/pack', 4000);
    write('.venv/lib/site.py', 1500);
    writeFileSync(path.join(dir, '.dockerignore'), 'node_modules\n!node_modules/keep\n');
    const read = readBuildContext(dir, 3000);
    assert.deepEqual(Object.keys(read.files).sort(), ['.dockerignore', '.venv/lib/site.py', 'node_modules/keep/README', 'src/main.py', 'src/run.sh']);
    assert.deepEqual(read.executables, ['src/run.sh']);
    assert.throws(
      () => readBuildContext(dir, 1000),
      (err: Error) => /holds 0\.0 MB, more than 0\.0 MB: \.venv 0\.0 MB, node_modules 0\.0 MB, src 0\.0 MB; leave out .* in .*\.dockerignore/.test(err.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
