import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CONTROL_PLANE_CERTIFICATE_NAME, ErrorCode, SpaceError } from '@space/protocol';
import { subjectAltNames } from '@space/server-kit';

const run = promisify(execFile);

/** How long a node's certificate is valid: a node joined again (a new join token) gets a new one. */
const nodeCertificateDays = 397;

/**
 * Makes a cluster CA in `dir` (`ca.key`, root's only, and `ca.crt`), unless one is there: what
 * `space cluster ca init` and `space cluster up` do. Every control plane of the cluster gets the
 * same directory (`SPACE_CLUSTER_CA_DIR`), like the secrets key. Whether it made one.
 */
export async function createClusterCa(dir: string): Promise<boolean> {
  if (existsSync(path.join(dir, 'ca.crt'))) return false;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    path.join(dir, 'ca.key'),
    '-out',
    path.join(dir, 'ca.crt'),
    '-days',
    '3650',
    '-subj',
    '/CN=SPACE cluster CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE,pathlen:0',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return true;
}

/**
 * The cluster's CA, on the control planes: it signs the certificate each node serves its node API
 * with (from the node's own key, which never leaves it), and control planes trust node APIs by it;
 * it signs the control planes' client certificates too, by which node APIs trust them (mutual TLS).
 */
export class ClusterCa {
  private constructor(
    private readonly dir: string,
    /** The CA certificate (PEM): what node APIs' certificates are checked against. */
    readonly certificate: string,
  ) {}

  static async open(dir: string): Promise<ClusterCa> {
    const [certificate, key] = [path.join(dir, 'ca.crt'), path.join(dir, 'ca.key')];
    if (!existsSync(certificate) || !existsSync(key))
      throw new Error(`SPACE_CLUSTER_CA_DIR=${dir} holds no cluster CA (ca.crt and ca.key): make one with "space cluster ca init --dir ${dir}"`);
    return new ClusterCa(dir, await readFile(certificate, 'utf8'));
  }

  /**
   * A certificate for node `nodeId`'s API, for its key in `csr` (PEM; its subject and extensions
   * are not used: the certificate names the node and `hosts`, the names the control planes reach
   * it by). A CSR that does not verify is refused. For serving only: a node's certificate does not
   * make it a client the node APIs take.
   */
  async issueNodeCertificate(nodeId: string, csr: string, hosts: string[]): Promise<string> {
    return this.sign(csr, nodeId, `extendedKeyUsage=serverAuth\nsubjectAltName=${subjectAltNames(hosts)}`, nodeCertificateDays);
  }

  /**
   * A new key and a client certificate for it, named `CONTROL_PLANE_CERTIFICATE_NAME`: what a
   * control plane presents to node APIs (mutual TLS), valid `days`. Made in this process, never written down.
   */
  async issueControlPlaneCertificate(days: number): Promise<{ cert: string; key: string }> {
    const work = await mkdtemp(path.join(tmpdir(), 'space-cp-cert-'));
    try {
      const keyFile = path.join(work, 'client.key');
      await writeFile(keyFile, '', { mode: 0o600 });
      await run('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', keyFile]);
      const { stdout: csr } = await run('openssl', ['req', '-new', '-key', keyFile, '-subj', `/CN=${CONTROL_PLANE_CERTIFICATE_NAME}`]);
      const cert = await this.sign(csr, CONTROL_PLANE_CERTIFICATE_NAME, 'extendedKeyUsage=clientAuth', days);
      return { cert, key: await readFile(keyFile, 'utf8') };
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** A certificate of this CA for the key of `csr` (checked), named `commonName`, with the extensions `ext` adds, valid `days`. */
  private async sign(csr: string, commonName: string, ext: string, days: number): Promise<string> {
    const work = await mkdtemp(path.join(tmpdir(), 'space-cert-'));
    const file = (name: string) => path.join(work, name);
    try {
      await writeFile(file('request.csr'), csr, { mode: 0o600 });
      await run('openssl', ['req', '-in', file('request.csr'), '-noout', '-verify']).catch(() => {
        throw new SpaceError(ErrorCode.VALIDATION_FAILED, 'csr: not a certificate request signed by its own key (PEM)');
      });
      await writeFile(file('request.ext'), `basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n${ext}\n`);
      await run('openssl', [
        'x509',
        '-req',
        '-in',
        file('request.csr'),
        '-CA',
        path.join(this.dir, 'ca.crt'),
        '-CAkey',
        path.join(this.dir, 'ca.key'),
        '-set_serial',
        `0x${randomBytes(16).toString('hex')}`,
        '-days',
        String(days),
        '-subj',
        `/CN=${commonName}`,
        '-extfile',
        file('request.ext'),
        '-out',
        file('issued.crt'),
      ]);
      return await readFile(file('issued.crt'), 'utf8');
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
}
