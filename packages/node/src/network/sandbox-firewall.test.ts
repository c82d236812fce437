import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { runCommand } from '../run-command.js';
import { SandboxFirewall } from './sandbox-firewall.js';

// Real iptables on the host, for links that do not exist: rules may name any interface. Not `sp…`,
// which a node agent starting meanwhile would sweep as stale.
const ports = { dns: 40053, http: 40080, https: 40443 };

async function rulesNaming(hostIf: string): Promise<string[]> {
  const lines: string[] = [];
  for (const table of ['nat', 'filter']) {
    const { stdout } = await runCommand(['iptables', '-w', '-t', table, '-S']);
    lines.push(...stdout.split('\n').filter((line) => line.split(' ').includes(hostIf)));
  }
  return lines;
}

async function withLink(body: (hostIf: string) => Promise<void>): Promise<void> {
  const hostIf = `tfw${randomBytes(4).toString('hex')}`;
  try {
    await body(hostIf);
  } finally {
    await new SandboxFirewall(ports).open(hostIf);
    assert.deepEqual(await rulesNaming(hostIf), []);
  }
}

test("a link's rules go as they came, by name, and all of them", async () => {
  await withLink(async (hostIf) => {
    const firewall = new SandboxFirewall(ports);
    await firewall.close(hostIf, '10.213.250.2');
    assert.equal((await rulesNaming(hostIf)).length, 9);
    await firewall.open(hostIf, '10.213.250.2');
    assert.deepEqual(await rulesNaming(hostIf), []);
  });
});

test('rules made with other gateway ports, or a link whose address is not known, are found by listing and go too', async () => {
  await withLink(async (hostIf) => {
    await new SandboxFirewall({ dns: 41053, http: 41080, https: 41443 }).close(hostIf, '10.213.250.6');
    await new SandboxFirewall(ports).open(hostIf, '10.213.250.6');
    assert.deepEqual(await rulesNaming(hostIf), []);

    await new SandboxFirewall(ports).close(hostIf, '10.213.250.6');
    await new SandboxFirewall(ports).open(hostIf);
    assert.deepEqual(await rulesNaming(hostIf), []);
  });
});

test('a link missing one of its rules loses the others', async () => {
  await withLink(async (hostIf) => {
    const firewall = new SandboxFirewall(ports);
    await firewall.close(hostIf, '10.213.250.10');
    await runCommand(['iptables', '-w', '-D', 'FORWARD', '-i', hostIf, '-j', 'DROP']);
    await firewall.open(hostIf, '10.213.250.10');
    assert.deepEqual(await rulesNaming(hostIf), []);
  });
});
