// Only the egress gateway phase: `node bench/gateway.mjs [--quick]` (the full `./space bench` runs it too).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeAddedLatency, measureGateway } from './gateway-phase.mjs';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const quick = process.argv.includes('--quick');
const dataDir = process.env.SPACE_BENCH_DATA_DIR ?? '/var/lib/space-test';
const { results, rows, record } = recorder();
const medians = await measureGateway({ dataDir, record, requests: quick ? 30 : 200, downloadRuns: quick ? 1 : 3 });
printTable(rows);
const added = describeAddedLatency(medians);
console.log(`\n${added.join('\n')}`);
const outDir = path.join(root, 'bench/results');
mkdirSync(outDir, { recursive: true });
const file = path.join(outDir, `gateway-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ machine: { cpus: (await import('node:os')).cpus().length, node: process.version }, results, added }, null, 2));
console.log(`JSON: ${file}`);
