import type { ClusterCa } from './cluster-ca.js';

/** A cluster's TLS on a control plane: the CA (issuing node certificates, checking node APIs) and the certificate this one presents to them. */
export interface ClusterTls {
  ca: ClusterCa;
  certificate: ControlPlaneCertificate;
}

/** How long a control plane's client certificate is valid; it is renewed well before. */
const validDays = 7;
/** How often it is renewed: a control plane running for weeks always holds one with days left. */
const renewEveryMs = 24 * 60 * 60_000;

/**
 * The client certificate this control plane presents to node APIs (mutual TLS), of the cluster CA,
 * issued at start from a key made in memory and renewed every day: calls open their new
 * connections with the newest (`identity`), so renewal needs no restart and drops no connection.
 */
export class ControlPlaneCertificate {
  private timer: NodeJS.Timeout | null = null;

  private constructor(
    private readonly ca: ClusterCa,
    private current: { cert: string; key: string },
    private readonly log: (message: string) => void,
  ) {}

  static async issue(ca: ClusterCa, log: (message: string) => void): Promise<ControlPlaneCertificate> {
    return new ControlPlaneCertificate(ca, await ca.issueControlPlaneCertificate(validDays), log);
  }

  /** The newest certificate and its key (PEM). */
  readonly identity = (): { cert: string; key: string } => this.current;

  /** A new key and certificate; the old one stays valid until it expires (connections opened with it go on). */
  async renew(): Promise<void> {
    this.current = await this.ca.issueControlPlaneCertificate(validDays);
  }

  startRenewal(): void {
    this.timer ??= setInterval(
      () =>
        void this.renew().catch((err: Error) =>
          this.log(`could not renew this control plane's client certificate (the current one is valid ${validDays} days from its issue): ${err.message}`),
        ),
      renewEveryMs,
    );
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
