import type { IncomingMessage } from 'node:http';
import { TLSSocket } from 'node:tls';
import { CONTROL_PLANE_CERTIFICATE_NAME, ErrorCode, SpaceError } from '@space/protocol';

/**
 * Refuses a mutual TLS client of the node API whose certificate, though of the cluster CA, is not a
 * control plane's: another node's (the CA signs theirs too). Over plain HTTP, or without client
 * certificates asked for, there is nothing to check (the node token still is).
 */
export function refuseUnlessControlPlane(req: IncomingMessage): void {
  if (!(req.socket instanceof TLSSocket)) return;
  const name = req.socket.getPeerCertificate()?.subject?.CN;
  if (name !== undefined && name !== CONTROL_PLANE_CERTIFICATE_NAME)
    throw new SpaceError(ErrorCode.FORBIDDEN, `the node API serves control planes only: this client's certificate names ${JSON.stringify(name)}`);
}
