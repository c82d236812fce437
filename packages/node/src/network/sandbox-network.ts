import { existsSync } from 'node:fs';
import { type CommandRunner, spawnedCommands } from '../run-command.js';
import { IpLeases, type Lease } from './ip-leases.js';
import type { SandboxFirewall } from './sandbox-firewall.js';

export interface SandboxNetworkInfo {
  netns: string;
  netnsPath: string;
  hostIf: string;
  lease: Lease;
  /** Addresses of a restored image's former sandboxes the link holds besides its lease's own. */
  inheritedAddresses: string[];
}

/**
 * One network namespace per sandbox, joined to the host by a veth pair on a private /30. Its
 * default route leads to the host end, where the firewall sends DNS, HTTP and HTTPS to the node's
 * egress gateway and drops everything else: the gateway is the sandbox's only way out. The node
 * agent reaches the daemon over the same link.
 *
 * A sandbox restored from a memory image also holds, as /32s, the addresses of the sandboxes the
 * image was saved from (its sockets may be bound to them). Nothing leaves with those: the host
 * end's firewall takes only the lease's own address.
 */
export class SandboxNetwork {
  constructor(
    private readonly leases: IpLeases,
    private readonly firewall: SandboxFirewall,
    private readonly commands: CommandRunner = spawnedCommands,
  ) {}

  static names(sandboxId: string): { netns: string; hostIf: string } {
    const short = sandboxId.replace(/^sbx_/, '').slice(0, 10);
    return { netns: `space-${sandboxId}`, hostIf: `sp${short}` };
  }

  async create(sandboxId: string, owner: string, inherited: readonly string[] = []): Promise<SandboxNetworkInfo> {
    const { netns, hostIf } = SandboxNetwork.names(sandboxId);
    const lease = await this.leases.acquire(`${owner} ${netns}`);
    const inheritedAddresses = [...new Set(inherited)].filter((address) => address !== lease.sandboxIp);
    try {
      // Four `ip` runs rather than one per step: each is a process started on the create path.
      await this.commands.run(['ip', 'netns', 'add', netns]);
      await this.commands.run(['ip', '-batch', '-'], {
        input: ipBatch([`link add ${hostIf} type veth peer name eth0 netns ${netns}`, `addr add ${lease.hostIp}/${lease.prefix} dev ${hostIf}`]),
      });
      await this.firewall.close(hostIf, lease.sandboxIp);
      await this.commands.run(['ip', 'link', 'set', hostIf, 'up']);
      await this.commands.run(['ip', '-n', netns, '-batch', '-'], {
        input: ipBatch([...sandboxSideAddresses(lease, inheritedAddresses), 'link set eth0 up', 'link set lo up', ...sandboxSideRoute(lease)]),
      });
    } catch (err) {
      await this.destroy(sandboxId, lease.index);
      throw err;
    }
    return { netns, netnsPath: `/var/run/netns/${netns}`, hostIf, lease, inheritedAddresses };
  }

  /** Removes the namespace (which takes the veth pair with it) and frees the subnet. Idempotent. */
  async destroy(sandboxId: string, leaseIndex: number | null): Promise<void> {
    const { netns, hostIf } = SandboxNetwork.names(sandboxId);
    if (existsSync(`/var/run/netns/${netns}`)) await this.commands.run(['ip', 'netns', 'delete', netns], { allowFailure: true });
    await this.commands.run(['ip', 'link', 'delete', hostIf], { allowFailure: true, stdio: ['ignore', 'ignore', 'ignore'] });
    await this.firewall.open(hostIf, leaseIndex === null ? undefined : IpLeases.describe(leaseIndex).sandboxIp);
    if (leaseIndex !== null) await this.leases.release(leaseIndex);
  }

  static exists(netns: string): boolean {
    return existsSync(`/var/run/netns/${netns}`);
  }

  /** Points an adopted sandbox's link at this agent's gateway (its ports change with every start). */
  refreshRules(sandboxId: string, sandboxIp: string): Promise<void> {
    return this.firewall.refresh(SandboxNetwork.names(sandboxId).hostIf, sandboxIp);
  }

  /** Drops firewall rules of sandbox links that are gone (left by a crash). */
  removeStaleRules(): Promise<number> {
    return this.firewall.removeStale('sp', (name) => existsSync(`/sys/class/net/${name}`));
  }
}

/** The lease's address on its /30 (the route to the host end), then the inherited ones, alone. */
function sandboxSideAddresses(lease: Lease, inherited: readonly string[]): string[] {
  return [`addr replace ${lease.sandboxIp}/${lease.prefix} dev eth0`, ...inherited.map((address) => `addr replace ${address}/32 dev eth0`)];
}

/** The default route (to the gateway); set once the link is up. */
function sandboxSideRoute(lease: Lease): string[] {
  return [`route replace default via ${lease.hostIp} dev eth0`];
}

/** Commands for `ip -batch -`, one a line. */
function ipBatch(commands: string[]): string {
  return commands.map((command) => `${command}\n`).join('');
}
