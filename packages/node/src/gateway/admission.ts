import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import type { EgressAuditEntry, SessionEgressConfig } from '@space/protocol';

/** A request the gateway let through, with where it goes and its audit entry. */
export interface Admission {
  tls: boolean;
  host: string;
  address: string;
  port: number;
  config: SessionEgressConfig;
  entry: EgressAuditEntry;
  finish: (status: number, decision: EgressAuditEntry['decision'], reason?: string) => void;
}

/** A refusal on a raw connection (an upgrade request has no response object). */
export function refuseRaw(socket: Socket, status: number, message: string, code?: string): void {
  const body = `SPACE gateway: ${message}\n`;
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\ncontent-type: text/plain; charset=utf-8\r\nx-space-gateway-error: ${code ?? status}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

