import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** A CA made for a test and one server certificate it signed, as PEM files in a directory. */
export interface TestCertificates {
  caFile: string;
  certFile: string;
  keyFile: string;
}

/** The `subjectAltName` of an openssl extension file for `names`: `IP:` for addresses, `DNS:` for host names. */
export function subjectAltNames(names: string[]): string {
  return names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
}

/**
 * Makes, with `openssl` (P-256, valid two days), a CA named `caName` and a server certificate for
 * `names` (host names, or IP addresses such as 127.0.0.1), in `dir`. For tests and the loopback
 * servers of tests: a real TLS handshake against a CA nobody else trusts.
 */
export function makeTestCertificates(dir: string, names: string[], caName = 'SPACE test CA'): TestCertificates {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const caFile = path.join(dir, 'ca.crt');
  openssl([
    'req',
    '-x509',
    ...newKey,
    '-keyout',
    path.join(dir, 'ca.key'),
    '-out',
    caFile,
    '-days',
    '2',
    '-subj',
    `/CN=${caName}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
  ]);
  const server = signed(dir, 'server', names[0]!, `extendedKeyUsage=serverAuth\nsubjectAltName=${subjectAltNames(names)}`);
  return { caFile, ...server };
}

/**
 * A client certificate (for mutual TLS) named `commonName`, signed by the CA `makeTestCertificates`
 * made in `dir`, valid `days` (0: it expires the second it is issued).
 */
export function makeTestClientCertificate(dir: string, commonName: string, fileName = 'client', days = 2): { certFile: string; keyFile: string } {
  return signed(dir, fileName, commonName, 'extendedKeyUsage=clientAuth', days);
}

const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore' });
}

/** A new key and a certificate of `dir`'s CA for it, as `<name>.key` and `<name>.crt`, with the extensions `ext` adds. */
function signed(dir: string, name: string, commonName: string, ext: string, days = 2): { certFile: string; keyFile: string } {
  const file = (suffix: string): string => path.join(dir, `${name}.${suffix}`);
  openssl(['req', ...newKey, '-keyout', file('key'), '-out', file('csr'), '-subj', `/CN=${commonName}`]);
  signRequest(dir, name, ext, days);
  return { certFile: file('crt'), keyFile: file('key') };
}

/**
 * A certificate of the CA `makeTestCertificates` made in `dir` for the certificate request `csr`
 * (PEM), valid `days`: what a test's stand-in for a control plane hands out.
 */
export function signTestCertificateRequest(dir: string, csr: string, days = 2): string {
  writeFileSync(path.join(dir, 'request.csr'), csr);
  signRequest(dir, 'request', '', days);
  return readFileSync(path.join(dir, 'request.crt'), 'utf8');
}

/** Signs `<name>.csr` with `dir`'s CA into `<name>.crt`, with the extensions `ext` adds. */
function signRequest(dir: string, name: string, ext: string, days: number): void {
  const file = (suffix: string): string => path.join(dir, `${name}.${suffix}`);
  writeFileSync(file('ext'), `basicConstraints=CA:FALSE\n${ext}\n`);
  openssl([
    'x509',
    '-req',
    '-in',
    file('csr'),
    '-CA',
    path.join(dir, 'ca.crt'),
    '-CAkey',
    path.join(dir, 'ca.key'),
    '-CAcreateserial',
    '-out',
    file('crt'),
    '-days',
    String(days),
    '-extfile',
    file('ext'),
  ]);
}
