import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import { SingleFlight } from '@space/server-kit';
import { runCommand } from '../run-command.js';

const opensslConfig = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = SPACE
[ca]
basicConstraints = critical,CA:TRUE,pathlen:0
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[leaf]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
`;

/** Leaf certificates are cached per host name; beyond this many the oldest is dropped. */
const maxCachedHosts = 2000;
/**
 * `openssl` runs at most this many at a time, and at most `maxWaitingIssues` wait: a sandbox opening
 * TLS connections with endless new SNI names must not fill the host with processes. Past the queue,
 * the handshake fails (the client may retry).
 */
const maxConcurrentIssues = 2;
const maxWaitingIssues = 64;

/**
 * The gateway's certificate authority: one CA for the whole cluster (every node is given the same
 * directory), so a sandbox restored or forked on any node keeps trusting its gateway. Leaf
 * certificates for the hosts sandboxes talk to are issued on first use with `openssl` and kept in
 * memory. The CA key never leaves this directory (root only); sandboxes get the certificate.
 */
export class GatewayCa {
  private readonly contexts = new Map<string, { context: SecureContext; renewAt: number }>();
  private readonly issuing = new SingleFlight<SecureContext>();
  private leafKey = '';
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  certificatePem = '';

  constructor(private readonly dir: string) {}

  private file(name: string): string {
    return path.join(this.dir, name);
  }

  /** Creates the CA on first use (an EC P-256 key, ten years) and a leaf key for this process. */
  async load(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await writeFile(this.file('openssl.cnf'), opensslConfig, { mode: 0o600 });
    if (!existsSync(this.file('ca.crt')) || !existsSync(this.file('ca.key'))) {
      // Written under temporary names, then renamed: a crash never leaves a key without its certificate.
      await runCommand([
        'openssl',
        'req',
        '-config',
        this.file('openssl.cnf'),
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        this.file('ca.key.new'),
        '-out',
        this.file('ca.crt.new'),
        '-days',
        '3650',
        '-subj',
        '/O=SPACE/CN=SPACE gateway CA',
        '-extensions',
        'ca',
      ]);
      await rename(this.file('ca.key.new'), this.file('ca.key'));
      await rename(this.file('ca.crt.new'), this.file('ca.crt'));
    }
    if (!existsSync(this.file('leaf.key'))) {
      await runCommand(['openssl', 'genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', this.file('leaf.key.new')]);
      await rename(this.file('leaf.key.new'), this.file('leaf.key'));
    }
    this.certificatePem = await readFile(this.file('ca.crt'), 'utf8');
    this.leafKey = await readFile(this.file('leaf.key'), 'utf8');
  }

  /** The TLS context presented to a sandbox asking for `host` (SNI). */
  /** Whether `host`'s certificate is issued and fresh (a handshake for it costs no `openssl` run). */
  hasContext(host: string): boolean {
    return (this.contexts.get(host)?.renewAt ?? 0) > Date.now();
  }

  contextFor(host: string): Promise<SecureContext> {
    const cached = this.contexts.get(host);
    if (cached && cached.renewAt > Date.now()) return Promise.resolve(cached.context);
    return this.issuing.run(host, async () => {
      const cert = await this.issue(host);
      const context = createSecureContext({ key: this.leafKey, cert: cert + this.certificatePem });
      this.contexts.delete(host);
      if (this.contexts.size >= maxCachedHosts) this.contexts.delete(this.contexts.keys().next().value!);
      // Issued for 30 days, renewed after 7: a long-running gateway never presents an expired one.
      this.contexts.set(host, { context, renewAt: Date.now() + 7 * 24 * 3600_000 });
      return context;
    });
  }

  private async issue(host: string): Promise<string> {
    if (this.running >= maxConcurrentIssues) {
      if (this.waiting.length >= maxWaitingIssues) throw new Error(`too many certificates being issued; refusing ${host} for now`);
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
    this.running++;
    try {
      return await this.runOpenssl(host);
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }

  /** Most `openssl` processes running at once so far (for tests). */
  peakRunning = 0;

  private async runOpenssl(host: string): Promise<string> {
    this.peakRunning = Math.max(this.peakRunning, this.running);
    // `host` is an SNI name the gateway already checked against a strict DNS-name pattern.
    const { stdout } = await runCommand([
      'openssl',
      'req',
      '-config',
      this.file('openssl.cnf'),
      '-new',
      '-x509',
      '-key',
      this.file('leaf.key'),
      '-CA',
      this.file('ca.crt'),
      '-CAkey',
      this.file('ca.key'),
      '-subj',
      `/CN=${host}`,
      '-extensions',
      'leaf',
      '-addext',
      `subjectAltName=DNS:${host}`,
      '-days',
      '30',
      '-set_serial',
      `0x${randomBytes(16).toString('hex')}`,
    ]);
    return stdout;
  }
}
