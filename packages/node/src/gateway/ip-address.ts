import { isIP } from 'node:net';

/** An address as the egress rules check it: IPv4 where the IPv6 form only wraps an IPv4 address. */
interface CheckedAddress {
  address: string;
  family: 'ipv4' | 'ipv6';
}

/** The eight 16-bit words of an IPv6 address (`::` expanded, a dotted IPv4 tail read as two words); null if it is not one. */
function ipv6Words(address: string): number[] | null {
  if (isIP(address) !== 6) return null;
  let text = address.toLowerCase();
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, null];
  const words = (part: string) => (part === '' ? [] : part.split(':').map((w) => Number.parseInt(w, 16)));
  const front = words(head);
  if (tail === null) return front;
  const back = words(tail);
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
}

/**
 * `address` normalized for the rules: an IPv4-mapped IPv6 address (`::ffff:7f00:1`,
 * `::ffff:127.0.0.1`) is its IPv4 address, so every IPv4 rule applies to it; zone ids dropped.
 * Other IPv6 forms that embed an IPv4 address (IPv4-compatible, translated, NAT64, 6to4, Teredo)
 * stay IPv6 and are refused by range (see `embeddingRanges`).
 */
export function checkedAddress(raw: string): CheckedAddress {
  const address = raw.split('%')[0]!;
  const words = ipv6Words(address);
  if (!words) return { address, family: 'ipv4' };
  if (words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff)
    return { address: [words[6]! >> 8, words[6]! & 0xff, words[7]! >> 8, words[7]! & 0xff].join('.'), family: 'ipv4' };
  return { address: words.map((w) => w.toString(16)).join(':'), family: 'ipv6' };
}

/** IPv6 ranges whose addresses carry an IPv4 address or a host-local meaning: never reachable from a sandbox. */
export const embeddingRanges: [string, number, 'ipv6'][] = [
  ['::', 96, 'ipv6'], // IPv4-compatible (deprecated), the unspecified address and loopback
  ['::ffff:0:0:0', 96, 'ipv6'], // IPv4-translated (SIIT)
  ['64:ff9b::', 96, 'ipv6'], // NAT64, well-known prefix
  ['64:ff9b:1::', 48, 'ipv6'], // NAT64, local use
  ['100::', 64, 'ipv6'], // discard-only
  ['2001::', 32, 'ipv6'], // Teredo
  ['2002::', 16, 'ipv6'], // 6to4
  ['fec0::', 10, 'ipv6'], // site-local (deprecated)
];
