// Only snapshot preloading: `node bench/template-images.mjs [--quick]` creates base sessions with no
// warm pool, first by cold boot (the baseline), then restored from the template's memory image.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { measureTemplateImages } from './pool-phase.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const quick = process.argv.includes('--quick');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const { results, rows, record } = recorder();
await measureTemplateImages({ dataDir, record, runs: quick ? 5 : 20, coldToo: true });
printTable(rows);
const ratio = results['create base, template image + first exec'].median / results['create base, cold boot + first exec'].median;
console.log(`\ncreate + first exec, from the template image / cold boot: ${ratio.toFixed(2)}x (median)`);
const outDir = path.join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const file = path.join(outDir, `template-images-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ machine: { cpus: (await import('node:os')).cpus().length, node: process.version }, results, ratio }, null, 2));
console.log(`JSON: ${file}`);
