// What a sandbox link's firewall rules cost to add and to remove beside other links' rules (9 each),
// as a node full of sandboxes has them: removal by listing the host's rules (a link whose address is
// not known) against removal by name (the rules the link was given). Real iptables, on links that do
// not exist (rules may name any interface); every rule it adds is removed, even on failure.
// Usage: ./space script bench/firewall-rules.mjs [--links 100,600] [--rounds 15] [--json out.json]
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { SandboxFirewall } from '../packages/node/dist/network/sandbox-firewall.js';
import { printTable, recorder } from './stats.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: { links: { type: 'string', default: '100,600' }, rounds: { type: 'string', default: '15' }, json: { type: 'string' } },
});
const levels = values.links.split(',').map(Number);
const rounds = Number(values.rounds);
const firewall = new SandboxFirewall({ dns: 40053, http: 40080, https: 40443 });
// Not `sp…`: a node agent starting meanwhile would sweep those as stale.
const link = (i) => [`tfb${i}`, `10.213.${192 + Math.floor(i / 64)}.${(i % 64) * 4 + 2}`];

const { results, rows, record } = recorder();
const added = new Set();
try {
  for (const links of levels) {
    for (let i = added.size; i < links; i++) {
      const [name, ip] = link(i);
      await firewall.close(name, ip);
      added.add(name);
    }
    const samples = { add: [], byListing: [], byName: [] };
    for (let round = 0; round < rounds; round++) {
      // Interleaved, so both ways see the same host.
      for (const way of ['byListing', 'byName']) {
        const name = `tfx${round}${way === 'byName' ? 'n' : 'l'}`;
        const ip = '10.213.191.2';
        let started = performance.now();
        await firewall.close(name, ip);
        samples.add.push(performance.now() - started);
        started = performance.now();
        await firewall.open(name, way === 'byName' ? ip : undefined);
        samples[way].push(performance.now() - started);
      }
    }
    record(`${links} links (${links * 9} rules): add a link's rules`, samples.add);
    record(`${links} links: remove them by listing`, samples.byListing);
    record(`${links} links: remove them by name`, samples.byName);
  }
} finally {
  for (const name of added) await firewall.open(name);
}
printTable(rows);
const file = values.json ?? path.join(root, 'bench/results', `firewall-rules-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
mkdirSync(path.dirname(file), { recursive: true });
writeFileSync(file, JSON.stringify({ levels, rounds, results }, null, 2));
console.log(`JSON: ${file}`);
