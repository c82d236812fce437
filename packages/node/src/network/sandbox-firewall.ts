import { writeFile } from 'node:fs/promises';
import { runCommand } from '../run-command.js';

/**
 * Host firewall rules for one sandbox link: the sandbox may answer connections the host opened
 * (the node agent's daemon channel) but may open none of its own to the host, and nothing it sends
 * is forwarded. Without this, any host service listening on all addresses would be reachable
 * from inside the sandbox through the host end of its link.
 */
export class SandboxFirewall {
  private static rules(hostIf: string): string[][] {
    return [
      ['INPUT', '-i', hostIf, '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT'],
      ['INPUT', '-i', hostIf, '-j', 'DROP'],
      ['FORWARD', '-i', hostIf, '-j', 'DROP'],
    ];
  }

  async close(hostIf: string): Promise<void> {
    // Appended in order, after any rule of the host's own; ACCEPT of replies precedes the DROP.
    // One iptables-restore (without flushing) adds all three in a single process and transaction.
    const rules = SandboxFirewall.rules(hostIf).map((rule) => `-A ${rule.join(' ')}`);
    await runCommand(['iptables-restore', '-w', '--noflush'], { input: `*filter\n${rules.join('\n')}\nCOMMIT\n` });
    // No IPv6 on the host end: the sandbox cannot reach host services over link-local addresses either.
    await writeFile(`/proc/sys/net/ipv6/conf/${hostIf}/disable_ipv6`, '1').catch(() => undefined);
  }

  async open(hostIf: string): Promise<void> {
    for (const rule of SandboxFirewall.rules(hostIf)) {
      while ((await runCommand(['iptables', '-w', '-D', ...rule], { allowFailure: true })).code === 0) {
        // a rule added twice (e.g. after a crash) is removed every time
      }
    }
  }

  /** Removes rules left for links that no longer exist (after a crash). */
  async removeStale(prefix: string, linkExists: (name: string) => boolean): Promise<number> {
    const { stdout } = await runCommand(['iptables', '-w', '-S'], { allowFailure: true });
    const stale = new Set<string>();
    for (const match of stdout.matchAll(/-i (\S+)/g)) if (match[1]!.startsWith(prefix) && !linkExists(match[1]!)) stale.add(match[1]!);
    for (const hostIf of stale) await this.open(hostIf);
    return stale.size;
  }
}
