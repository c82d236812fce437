import { writeFile } from 'node:fs/promises';
import { type CommandRunner, spawnedCommands } from '../run-command.js';

/** Where the node's egress gateway listens (host ports, on every address). */
export interface GatewayPorts {
  dns: number;
  http: number;
  https: number;
}

type Table = 'filter' | 'nat';

/**
 * Host firewall rules for one sandbox link. The sandbox's DNS (udp 53), HTTP (80) and HTTPS (443)
 * traffic, to any address, is redirected to the node's egress gateway; the sandbox may answer
 * connections the host opened (the node agent's daemon channel); everything else it sends is
 * dropped, and nothing is forwarded. Without this, any host service listening on all addresses
 * would be reachable from inside the sandbox through the host end of its link.
 */
export class SandboxFirewall {
  constructor(
    private readonly gateway: GatewayPorts,
    private readonly commands: CommandRunner = spawnedCommands,
  ) {}

  private rules(hostIf: string, sandboxIp: string): Record<Table, string[]> {
    const { dns, http, https } = this.gateway;
    return {
      nat: [
        `-A PREROUTING -i ${hostIf} -p udp -m udp --dport 53 -j REDIRECT --to-ports ${dns}`,
        `-A PREROUTING -i ${hostIf} -p tcp -m tcp --dport 80 -j REDIRECT --to-ports ${http}`,
        `-A PREROUTING -i ${hostIf} -p tcp -m tcp --dport 443 -j REDIRECT --to-ports ${https}`,
      ],
      filter: [
        // Only the sandbox's own address: not one it inherited from a memory image (see SandboxNetwork)
        // nor any it made up, so the gateway, which tells sandboxes apart by address, never mistakes one.
        `-A INPUT -i ${hostIf} ! -s ${sandboxIp}/32 -j DROP`,
        `-A INPUT -i ${hostIf} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
        // Only connections the redirects above produced reach the gateway's ports: not direct ones.
        `-A INPUT -i ${hostIf} -p tcp -m conntrack --ctstate DNAT -m multiport --dports ${http},${https} -j ACCEPT`,
        `-A INPUT -i ${hostIf} -p udp -m conntrack --ctstate DNAT -m udp --dport ${dns} -j ACCEPT`,
        `-A INPUT -i ${hostIf} -j DROP`,
        `-A FORWARD -i ${hostIf} -j DROP`,
      ],
    };
  }

  /** Adds the link's rules (appended in order, after any rule of the host's own) in one transaction. */
  async close(hostIf: string, sandboxIp: string): Promise<void> {
    const rules = this.rules(hostIf, sandboxIp);
    const input = `*nat\n${rules.nat.join('\n')}\nCOMMIT\n*filter\n${rules.filter.join('\n')}\nCOMMIT\n`;
    await this.commands.run(['iptables-restore', '-w', '--noflush'], { input });
    // No IPv6 on the host end: the sandbox cannot reach host services over link-local addresses either.
    await writeFile(`/proc/sys/net/ipv6/conf/${hostIf}/disable_ipv6`, '1').catch(() => undefined);
  }

  /**
   * Removes every rule that names the link (whatever gateway ports it was made with). Given the
   * sandbox's address, first the rules `close` made, by name, in one transaction: listing the
   * host's rules costs as much as rewriting them, and more with every sandbox on the node (85 ms at
   * 5,200 rules). When any of them is not there as made (a gateway restarted in between), the
   * rules naming the link are listed and removed as they are.
   */
  async open(hostIf: string, sandboxIp?: string): Promise<void> {
    if (sandboxIp) {
      const rules = this.rules(hostIf, sandboxIp);
      const made = (['nat', 'filter'] as Table[]).flatMap((table) => rules[table].map((rule) => ({ table, rule })));
      if (await this.deleteAll(made)) return;
    }
    await this.deleteRules(await this.existingRules((name) => name === hostIf));
  }

  /**
   * Replaces a link's rules with ones for the current gateway ports (a restarted node agent
   * listens on new ones). The new rules go in before the old ones come out: no gap without DROP.
   */
  async refresh(hostIf: string, sandboxIp: string): Promise<void> {
    const old = await this.existingRules((name) => name === hostIf);
    await this.close(hostIf, sandboxIp);
    await this.deleteRules(old);
  }

  /** Removes rules left for links that no longer exist (after a crash). */
  async removeStale(prefix: string, linkExists: (name: string) => boolean): Promise<number> {
    const stale = await this.existingRules((name) => name.startsWith(prefix) && !linkExists(name));
    await this.deleteRules(stale);
    return new Set(stale.map((r) => r.hostIf)).size;
  }

  private async existingRules(matches: (hostIf: string) => boolean): Promise<{ table: Table; rule: string; hostIf: string }[]> {
    const found: { table: Table; rule: string; hostIf: string }[] = [];
    for (const table of ['nat', 'filter'] as Table[]) {
      const { stdout } = await this.commands.run(['iptables', '-w', '-t', table, '-S'], { allowFailure: true });
      for (const line of stdout.split('\n')) {
        // Options come in iptables' order, not ours: "-A INPUT ! -s 10.213.0.2/32 -i sp… -j DROP".
        const hostIf = /^-A \S+ (?:.* )?-i (\S+)/.exec(line)?.[1];
        if (hostIf && matches(hostIf)) found.push({ table, rule: line, hostIf });
      }
    }
    return found;
  }

  private async deleteRules(rules: { table: Table; rule: string }[]): Promise<void> {
    if (rules.length === 0 || (await this.deleteAll(rules))) return;
    // A rule already gone makes the whole transaction fail: then delete one by one, ignoring misses.
    for (const r of rules) await this.commands.run(['iptables', '-w', '-t', r.table, ...r.rule.replace(/^-A /, '-D ').split(' ')], { allowFailure: true });
  }

  /** Deletes all of the rules in one transaction, or none of them when any is missing: whether it did. */
  private async deleteAll(rules: { table: Table; rule: string }[]): Promise<boolean> {
    // iptables -S prints rules as iptables-restore reads them; "-D" deletes the first match of each.
    const input = (['nat', 'filter'] as Table[])
      .map(
        (table) =>
          `*${table}\n${rules
            .filter((r) => r.table === table)
            .map((r) => r.rule.replace(/^-A /, '-D '))
            .join('\n')}\nCOMMIT\n`,
      )
      .join('');
    return (await this.commands.run(['iptables-restore', '-w', '--noflush'], { input, allowFailure: true })).code === 0;
  }
}
