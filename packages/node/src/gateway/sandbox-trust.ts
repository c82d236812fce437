import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gatewayAddress } from './dns-responder.js';

/** Inside every sandbox: the gateway CA alone, and the system bundle that includes it. */
export const sandboxCaFile = '/etc/space/gateway-ca.crt';
export const sandboxCaBundle = '/etc/ssl/certs/ca-certificates.crt';

/** Points the usual TLS clients (OpenSSL, curl, git, Python requests and pip, Node.js) at the bundle. */
export const trustEnv: Record<string, string> = {
  SSL_CERT_FILE: sandboxCaBundle,
  CURL_CA_BUNDLE: sandboxCaBundle,
  GIT_SSL_CAINFO: sandboxCaBundle,
  REQUESTS_CA_BUNDLE: sandboxCaBundle,
  PIP_CERT: sandboxCaBundle,
  NODE_EXTRA_CA_CERTS: sandboxCaFile,
};

/**
 * Makes a new volume (a fresh snapshot of a template, so nothing in it is a session's yet) trust the
 * gateway CA and resolve names through the gateway. Never called on a volume a session has used:
 * its files are the session's and could be links pointing anywhere on the host.
 */
export async function installGatewayTrust(rootfs: string, caPem: string): Promise<void> {
  const inRoot = (p: string): string => path.join(rootfs, p);
  await mkdir(path.dirname(inRoot(sandboxCaFile)), { recursive: true });
  await writeFile(inRoot(sandboxCaFile), caPem, { mode: 0o644 });
  await mkdir(inRoot('usr/local/share/ca-certificates'), { recursive: true });
  await writeFile(inRoot('usr/local/share/ca-certificates/space-gateway.crt'), caPem, { mode: 0o644 });
  const bundle = inRoot(sandboxCaBundle);
  await mkdir(path.dirname(bundle), { recursive: true });
  const system = existsSync(bundle) ? await readFile(bundle, 'utf8') : '';
  if (!system.includes(caPem.trim())) await writeFile(bundle, `${system}${system && !system.endsWith('\n') ? '\n' : ''}${caPem}`, { mode: 0o644 });
  if (existsSync(inRoot('etc'))) {
    await rm(inRoot('etc/resolv.conf'), { force: true });
    await writeFile(
      inRoot('etc/resolv.conf'),
      `# Every name resolves to the SPACE egress gateway, which resolves it under the session's policy.\nnameserver ${gatewayAddress}\n`,
      { mode: 0o644 },
    );
  }
}
