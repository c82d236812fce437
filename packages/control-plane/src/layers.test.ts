import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../src/', import.meta.url));

/**
 * The control plane's folders, lowest first (docs/architecture.md): a folder imports only from
 * folders of lower layers, never from its own layer's others or from above. The composition root
 * (`control-plane.ts`, `service-graph.ts`, `settings.ts`, `index.ts`) and the tests' `test-support/` wire everything.
 */
const layers = [['store', 'metrics'], ['cluster'], ['tenants', 'templates', 'checkpoints'], ['sessions', 'usage'], ['builds'], ['maintenance'], ['api']];
const layerOf = new Map(layers.flatMap((folders, i) => folders.map((f) => [f, i] as const)));

test('each control-plane folder imports only from the layers below it', () => {
  const folders = readdirSync(source, { withFileTypes: true }).filter((d) => d.isDirectory() && d.name !== 'test-support');
  assert.deepEqual(
    folders.map((d) => d.name).filter((f) => !layerOf.has(f)),
    [],
    'every folder has a layer',
  );
  const offenders: string[] = [];
  for (const { name: folder } of folders) {
    for (const file of readdirSync(path.join(source, folder), { recursive: true, encoding: 'utf8' })) {
      if (!file.endsWith('.ts') || file.endsWith('.test.ts')) continue;
      const text = readFileSync(path.join(source, folder, file), 'utf8');
      for (const [, spec] of text.matchAll(/from '(\.{1,2}\/[^']+)'/g)) {
        const target = path.relative(source, path.resolve(path.join(source, folder, path.dirname(file)), spec!)).split(path.sep)[0]!;
        if (target === folder) continue;
        const below = layerOf.has(target) && layerOf.get(target)! < layerOf.get(folder)!;
        if (!below) offenders.push(`${folder}/${file} imports ${spec}`);
      }
    }
  }
  assert.deepEqual(offenders, []);
});
