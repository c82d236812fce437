import { readInsideVolume, writeInsideVolume } from '../runtime/volume-paths.js';
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
 * Makes a new volume (a fresh snapshot of a template) trust the gateway CA and resolve names
 * through the gateway. A tenant's template holds what a session or an image put there: links that
 * could point anywhere on the host are never followed.
 */
export async function installGatewayTrust(rootfs: string, caPem: string): Promise<void> {
  // A custom template's files were a session's or an image's: every path is written through
  // writeInsideVolume and read through readInsideVolume, which never follow a link out of the root.
  await writeInsideVolume(rootfs, sandboxCaFile, caPem, 0o644);
  await writeInsideVolume(rootfs, 'usr/local/share/ca-certificates/space-gateway.crt', caPem, 0o644);
  const system = (await readInsideVolume(rootfs, sandboxCaBundle)) ?? '';
  if (!system.includes(caPem.trim()))
    await writeInsideVolume(rootfs, sandboxCaBundle, `${system}${system && !system.endsWith('\n') ? '\n' : ''}${caPem}`, 0o644);
  // A lookup whose answer was lost (a full checkpoint's save cuts what is in flight) is asked again
  // after 2 s, not glibc's 5; three tries outlast the gateway's own 3 s bound on a stalled lookup.
  const resolv = `# Every name resolves to the SPACE egress gateway, which resolves it under the session's policy.\nnameserver ${gatewayAddress}\noptions timeout:2 attempts:3\n`;
  await writeInsideVolume(rootfs, 'etc/resolv.conf', resolv, 0o644);
}
