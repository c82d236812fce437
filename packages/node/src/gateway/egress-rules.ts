import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { EgressPolicy } from '@space/protocol';
import { checkedAddress, embeddingRanges } from './ip-address.js';

/** Where a request may go, or why not. */
export type EgressDecision = { allowed: true; address: string } | { allowed: false; reason: string };

/** Resolves a host name to its addresses (the host's resolver; injectable for tests). */
export type Resolve = (host: string) => Promise<string[]>;

const alwaysBlocked: [string, number, 'ipv4' | 'ipv6'][] = [
  ['0.0.0.0', 8, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'], // link-local, including cloud metadata services
  ['10.213.0.0', 16, 'ipv4'], // sandbox links
  ['198.18.0.0', 15, 'ipv4'], // the address sandboxes' DNS answers point at
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
  ...embeddingRanges,
];

const privateRanges: [string, number, 'ipv4' | 'ipv6'][] = [
  ['10.0.0.0', 8, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['fc00::', 7, 'ipv6'],
];

function blockList(ranges: [string, number, 'ipv4' | 'ipv6'][]): BlockList {
  const list = new BlockList();
  for (const [address, prefix, family] of ranges) list.addSubnet(address, prefix, family);
  return list;
}

export interface EgressRulesOptions {
  /** This host's own addresses, never reachable (default: those of its interfaces). */
  hostAddresses?: string[];
  /**
   * Whether sandboxes may reach IPv6 addresses at all (`SPACE_EGRESS_IPV6`; default false): an IPv6
   * form of a blocked IPv4 address is one more way past the rules, and the networks that run
   * sandboxes rarely route IPv6 out anyway.
   */
  ipv6?: boolean;
}

/** Whether `host` matches `pattern` (`example.com` exactly, `*.example.com` any name below it). */
export function hostMatches(pattern: string, host: string): boolean {
  if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return host === pattern;
}

/**
 * Decides where a sandbox's request may go. Named hosts are resolved here, on the node, and the
 * request goes to the address that was checked (no second lookup to race). Never reachable, whatever
 * the policy: loopback, link-local, multicast, sandbox links and every address of this host. Private
 * ranges (RFC 1918, CGNAT, ULA) need the session to name them: a domain in its allow-list, or a CIDR.
 */
export class EgressRules {
  private readonly blocked = blockList(alwaysBlocked);
  private readonly private = blockList(privateRanges);
  /** A policy's CIDRs as a block list, made once per policy object (a change replaces the object). */
  private readonly cidrLists = new WeakMap<EgressPolicy, BlockList>();
  private readonly ipv6: boolean;

  constructor(
    private readonly resolve: Resolve,
    options: EgressRulesOptions = {},
  ) {
    this.ipv6 = options.ipv6 ?? false;
    const hostAddresses = options.hostAddresses ?? Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
    for (const address of hostAddresses) {
      const n = checkedAddress(address);
      this.blocked.addAddress(n.address, n.family);
    }
  }

  /**
   * `pinned` is an address configured for the host (the test-only host map): only the policy's
   * mode and domains apply to it, not the address checks.
   */
  async decide(policy: EgressPolicy, host: string, pinned?: string): Promise<EgressDecision> {
    if (policy.mode === 'deny-all') return { allowed: false, reason: "the session's egress policy is deny-all" };
    const literal = isIP(host) !== 0;
    const named = !literal && policy.mode === 'allow-list' && policy.domains.some((pattern) => hostMatches(pattern, host));
    if (pinned)
      return policy.mode === 'allow-all' || named
        ? { allowed: true, address: pinned }
        : { allowed: false, reason: `${host} is not in the session's allowed domains` };
    if (policy.mode === 'allow-list' && !named && policy.cidrs.length === 0)
      return { allowed: false, reason: `${host} is not in the session's allowed domains` };
    let addresses: string[];
    try {
      addresses = literal ? [host] : await this.resolve(host);
    } catch (err) {
      return { allowed: false, reason: `${host} does not resolve: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
    }
    if (addresses.length === 0) return { allowed: false, reason: `${host} does not resolve` };
    let lastReason = '';
    for (const raw of addresses) {
      const { address, family } = checkedAddress(raw);
      if (family === 'ipv6' && !this.ipv6) {
        lastReason = `${host === raw ? host : `${host} (${raw})`} is an IPv6 address; IPv6 egress is off on this node (SPACE_EGRESS_IPV6)`;
        continue;
      }
      if (this.blocked.check(address, family)) {
        lastReason = `${host} resolves to ${address}, which sandboxes may never reach (loopback, link-local or the platform's own addresses)`;
        continue;
      }
      if (policy.mode === 'allow-all') {
        if (!this.private.check(address, family)) return { allowed: true, address };
        lastReason = `${address} is a private address; the session must list it (egress mode allow-list with a domain or CIDR)`;
        continue;
      }
      if (named || this.cidrsOf(policy).check(address, family)) return { allowed: true, address };
      lastReason = `${host} (${address}) is neither in the session's allowed domains nor in its allowed CIDRs`;
    }
    return { allowed: false, reason: lastReason };
  }

  private cidrsOf(policy: EgressPolicy): BlockList {
    let list = this.cidrLists.get(policy);
    if (!list) {
      list = blockList(
        policy.cidrs.map((c) => {
          const [address, prefix] = c.split('/');
          return [address!, Number(prefix), isIP(address!) === 6 ? 'ipv6' : 'ipv4'];
        }),
      );
      this.cidrLists.set(policy, list);
    }
    return list;
  }
}
