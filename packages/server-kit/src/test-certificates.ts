import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
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
  const file = (name: string): string => path.join(dir, name);
  const openssl = (args: string[]): void => void execFileSync('openssl', args, { stdio: 'ignore' });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  const ca = { caFile: file('ca.crt'), certFile: file('server.crt'), keyFile: file('server.key') };
  openssl([
    'req',
    '-x509',
    ...key,
    '-keyout',
    file('ca.key'),
    '-out',
    ca.caFile,
    '-days',
    '2',
    '-subj',
    `/CN=${caName}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
  ]);
  writeFileSync(file('server.ext'), `basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=${subjectAltNames(names)}\n`);
  openssl(['req', ...key, '-keyout', ca.keyFile, '-out', file('server.csr'), '-subj', `/CN=${names[0]}`]);
  openssl([
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    ca.caFile,
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-out',
    ca.certFile,
    '-days',
    '2',
    '-extfile',
    file('server.ext'),
  ]);
  return ca;
}
