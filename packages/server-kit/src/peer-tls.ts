/**
 * TLS between SPACE's own components (control planes and node APIs): which CA a peer's certificate
 * must be signed by, and, for mutual TLS, the certificate this side presents and the CA a server
 * checks its clients' certificates against.
 */

/** What a client trusts and presents on a TLS connection to a peer. */
export interface ClientTls {
  /** The CA (PEM) the peer's certificate must be signed by, in place of the system's. */
  ca?: string;
  /**
   * This side's certificate and key (PEM) for a peer that asks for one. Read for each new
   * connection, so a renewed certificate is presented from the next one on, without a restart.
   */
  identity?: () => { cert: string; key: string };
}

/** What a server presents and, for mutual TLS, which clients it lets complete a handshake. */
export interface ServerTls {
  cert: string;
  key: string;
  /** Only clients presenting a certificate of this CA (PEM) complete a handshake; none: any client. */
  clientCa?: string;
  /** Told the reason of each handshake refused (a missing, expired or foreign client certificate). */
  onRefused?: (reason: string) => void;
}

/** A client's TLS options for Node's `https`/`tls`/`ws` of `tls` (nothing for none). */
export function clientTlsOptions(tls: ClientTls | undefined): { ca?: string; cert?: string; key?: string } {
  return { ...(tls?.ca ? { ca: tls.ca } : {}), ...(tls?.identity ? tls.identity() : {}) };
}
