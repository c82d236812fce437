/** Whether `hostname` (of a URL) is this machine's loopback: plain HTTP to it never crosses a network. */
function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Why a node API at `url` is refused: plain HTTP to an address other than loopback carries the node
 * token and secret values in the clear. Null when it is HTTPS, loopback, or `allowed`
 * (`SPACE_ALLOW_PLAIN_NODE_API`).
 */
export function plainNodeApiRefusal(url: string, allowed: boolean): string | null {
  const { protocol, hostname } = new URL(url);
  if (allowed || protocol !== 'http:' || isLoopback(hostname)) return null;
  return `the node API at ${url} is plain HTTP on a network address (node tokens and secret values would cross it in the clear): join the node to a cluster with a CA (SPACE_CLUSTER_CA_DIR, deploy.md "The cluster CA") so it serves HTTPS, or set SPACE_ALLOW_PLAIN_NODE_API=1 on the control planes to take it anyway`;
}
