/**
 * The registry host a `docker://` reference pulls from, as Docker reads it: the first path
 * component when it names a host (has a dot or a port, or is `localhost`), else Docker Hub's
 * registry. Without the port; brackets of an IPv6 literal removed. Null if it does not parse.
 */
export function registryHost(reference: string): string | null {
  if (!reference.startsWith('docker://')) return null;
  const ref = reference.slice('docker://'.length).replace(/^\/\//, '');
  const slash = ref.indexOf('/');
  const first = slash === -1 ? '' : ref.slice(0, slash);
  if (!first || !(first.includes('.') || first.includes(':') || first === 'localhost')) return 'registry-1.docker.io';
  if (first.startsWith('[')) {
    const close = first.indexOf(']');
    return close > 1 ? first.slice(1, close).toLowerCase() : null;
  }
  const host = first.split(':')[0]!.toLowerCase();
  return host || null;
}

/**
 * skopeo's error without what the network said (refused, reset, timed out, no route): those tell
 * open ports from closed ones, so a pull's error is no port scanner.
 */
export function pullError(stderr: string): string {
  if (/dial tcp|connection refused|connection reset|no route to host|i\/o timeout|network is unreachable|EOF/i.test(stderr))
    return 'could not connect to the registry';
  return stderr.trim().slice(-500);
}
