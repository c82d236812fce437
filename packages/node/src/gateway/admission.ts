import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import type { EgressAuditEntry, SessionEgressConfig } from '@space/protocol';
import type { SecretRewriter } from './secret-rewriter.js';

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

/** A request's secret rewriters, by direction. */
export interface Rewriters {
  /** Placeholders to values, only for the secret's own hosts. */
  outbound: SecretRewriter;
  /** Values to placeholders: every answer, whichever host echoes them. */
  inbound: SecretRewriter;
}

/** The gateway's refusal: a text body that says why, and the code in a header for programs. */
export function refusal(status: number, message: string, code?: string): { headers: Record<string, string>; body: string } {
  return { headers: { 'content-type': 'text/plain; charset=utf-8', 'x-space-gateway-error': code ?? String(status) }, body: `SPACE gateway: ${message}\n` };
}

/** Header lines as HTTP/1.1 writes them (repeated headers once per value), without the blank line. */
export function headerLines(headers: Record<string, string | string[] | undefined>): string {
  return Object.entries(headers)
    .flatMap(([name, value]) => (value === undefined ? [] : Array.isArray(value) ? value : [value]).map((v) => `${name}: ${v}\r\n`))
    .join('');
}

/** A refusal on a raw connection (an upgrade request has no response object). */
export function refuseRaw(socket: Socket, status: number, message: string, code?: string): void {
  const { headers, body } = refusal(status, message, code);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${headerLines({ ...headers, 'content-length': String(Buffer.byteLength(body)), connection: 'close' })}\r\n${body}`,
  );
}
