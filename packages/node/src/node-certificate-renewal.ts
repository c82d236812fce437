import { X509Certificate } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { NodeCertificateReplySchema } from '@space/protocol';
import type { Logger } from './logger.js';
import { ask, certificateRequest, errorMessage, finishRenewal, keep } from './node-identity.js';

/** How often the node looks at its certificate's expiry. */
const checkEveryMs = 12 * 60 * 60_000;

export interface NodeCertificateRenewalOptions {
  /** The node's identity files (`<data>/node`): `tls.crt`, `tls.key`, `ca.crt`. */
  dir: string;
  nodeId: string;
  /** The names the control planes reach this node by, as at its join. */
  hosts: string[];
  controlPlanes: string[];
  credential: string;
  /** Renewed once fewer than this many milliseconds of its validity are left (`SPACE_NODE_CERT_RENEW_DAYS`). */
  renewBeforeMs: number;
  /** Serves the renewed certificate from the next connection on (the node API's server, no restart). */
  serve: (tls: { cert: string; key: string; clientCa?: string }) => void;
  log: Logger;
  now?: () => number;
}

/**
 * Keeps the node API's certificate of the cluster CA valid without a restart: before it expires, the
 * node makes a new key, asks the first control plane that answers for a certificate of it (with its
 * own credential), checks it is of the CA the node joined with, keeps both (`tls.crt.new`/`tls.key.new`,
 * then renamed into place; a stop between is finished at the next start) and serves the new one to
 * new connections.
 */
export class NodeCertificateRenewal {
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly options: NodeCertificateRenewalOptions) {}

  /** Checks now (renewing if due), then every 12 hours. */
  async start(): Promise<void> {
    await this.renewIfDue();
    this.timer = setInterval(() => void this.renewIfDue(), checkEveryMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Renews the certificate when it is due; a failure is logged and tried again at the next check. */
  async renewIfDue(): Promise<boolean> {
    const { options } = this;
    const file = (name: string) => path.join(options.dir, name);
    const current = new X509Certificate(await readFile(file('tls.crt')));
    const left = Date.parse(current.validTo) - (options.now ?? Date.now)();
    if (left > options.renewBeforeMs) return false;
    try {
      const csr = await certificateRequest(options.dir, options.nodeId);
      const body = JSON.stringify({ nodeId: options.nodeId, csr, hosts: options.hosts });
      const refusals: string[] = [];
      for (const url of options.controlPlanes) {
        const answer = await ask(url, '/v1/nodes/certificate', body, options.credential).catch((err: Error) => ({ status: 0, text: err.message }));
        if (answer.status !== 200) {
          refusals.push(`${url}: ${answer.status || 'no answer'} ${errorMessage(answer.text)}`);
          continue;
        }
        const reply = NodeCertificateReplySchema.parse(JSON.parse(answer.text));
        // The CA stays the one the node joined with (a node that joined before keeping it takes it now):
        // a renewal cannot make the node trust other clients, nor serve a certificate of another CA.
        const joinedWith = existsSync(file('ca.crt'));
        const ca = joinedWith ? await readFile(file('ca.crt'), 'utf8') : reply.caCertificate;
        if (!isIssuedBy(reply.certificate, ca)) throw new Error(`${url} answered with a certificate not of the cluster CA this node joined with: not taken`);
        if (!joinedWith) await keep(file('ca.crt'), ca);
        await keep(file('tls.crt.new'), reply.certificate);
        await finishRenewal(options.dir);
        const renewed = new X509Certificate(reply.certificate);
        options.serve({ cert: reply.certificate, key: await readFile(file('tls.key'), 'utf8'), clientCa: ca });
        options.log.info(
          `renewed the node API's certificate (the old one valid until ${current.validTo}, the new one until ${renewed.validTo}), served from now on`,
        );
        return true;
      }
      throw new Error(refusals.join('; '));
    } catch (err) {
      options.log.warn(`could not renew the node API's certificate (valid until ${current.validTo}): ${(err as Error).message}; trying again in 12 hours`);
      return false;
    }
  }
}

/** Whether `certificate` was signed by the key of `ca` (PEM both): a CA of the same name but another key is not it. */
function isIssuedBy(certificate: string, ca: string): boolean {
  const [cert, issuer] = [new X509Certificate(certificate), new X509Certificate(ca)];
  return cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
}
