import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../src/', import.meta.url));

/** The node's code that touches the btrfs volume, where a synchronous lookup stalls the event loop while a snapshot commits. */
const volumeCode = ['storage', 'sandbox', 'templates', 'template-images.ts', 'node-checkpoint-service.ts'];
/** Synchronous calls that stay, each on something other than the volume. */
const allowed = new Map([['storage/loopback-s3.ts', 'a test server in a temporary directory']]);

function filesUnder(entry: string): string[] {
  const full = path.join(source, entry);
  if (entry.endsWith('.ts')) return [entry];
  return readdirSync(full, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => path.join(entry, f));
}

test('no synchronous file system call in the node code that touches the btrfs volume', () => {
  const offenders = volumeCode
    .flatMap(filesUnder)
    .filter((file) => !allowed.has(file))
    .flatMap((file) =>
      readFileSync(path.join(source, file), 'utf8')
        .split('\n')
        .flatMap((line, i) => (/\b\w+Sync\(/.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
    );
  // A burst of creates once stalled the node 3.6 s at a time in existsSync (docs/benchmarks.md, 2026-12-01).
  assert.deepEqual(offenders, [], 'use the fs/promises calls (storage/path-exists.ts for existence)');
});
