import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { dnsNamePattern } from '@space/protocol';

/** The host a request names (Host header or SNI), lowercased and without port; null if malformed. */
export function parseHost(raw: string | undefined): string | null {
  if (!raw) return null;
  let host = raw.trim().toLowerCase();
  if (host.startsWith('[')) host = host.slice(1, host.indexOf(']'));
  else if (host.split(':').length === 2) host = host.split(':')[0]!;
  host = host.replace(/\.$/, '');
  if (isIP(host)) return host;
  return host.length <= 253 && dnsNamePattern.test(host) ? host : null;
}

/**
 * Why a request names another host than the one it is checked and sent for, or null: over TLS the
 * Host header must name the SNI's host, and an absolute-form target (`GET http://x/…`) the
 * request's host. Otherwise a placeholder swapped for a secret's host would travel to another.
 */
export function namedElsewhere(req: Pick<IncomingMessage, 'headers' | 'url'>, host: string, tls: boolean): string | null {
  if (tls && parseHost(req.headers.host) !== host)
    return `the Host header (${String(req.headers.host ?? '').slice(0, 253)}) does not name the TLS server name ${host}`;
  const target = req.url ?? '/';
  if (target.startsWith('/') || target === '*') return null;
  let named: string | null = null;
  try {
    named = parseHost(new URL(target).host);
  } catch {
    // not a URL: refused below
  }
  return named === host ? null : `the request target ${target.slice(0, 253)} does not name ${host}`;
}
