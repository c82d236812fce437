import { ErrorCode, PreviewPortSchema, SandboxLayout, SpaceError, nodePortProxyPath, nodeRoutes, type ListeningPort } from '@space/protocol';
import {
  type Router,
  type RequestContext,
  parseWith,
  proxyRequest,
  proxyUpgrade,
  waitForListener,
  type ProxyTarget,
  type ServeRoute,
  type UpgradeContext,
} from '@space/server-kit';
import type { SandboxManager } from '../sandbox/sandbox-manager.js';
import type { LiveSandbox } from '../sandbox/live-sandboxes.js';
import { callDaemon, onSandboxDeath } from '../sandbox/daemon-calls.js';

/** How long a request to a port waits for something to listen there (a server still starting); a declared service's port, as long as the control plane says, up to the longest. */
const listenWaitMs = 3000;
const longestListenWaitMs = 30_000;
const listenWaitHeader = 'x-space-listen-wait-ms';

/** The client's own Authorization header, carried past SPACE's (which the control plane used) to the sandbox's server. */
export const forwardedAuthorizationHeader = 'x-space-forwarded-authorization';

/**
 * Ports of the node's sandboxes, reached from outside (preview URLs):
 * `/node/v1/sandboxes/:sandboxId/ports/:port/<path>`, any method, upgrades (WebSocket) included,
 * proxied to the sandbox's address on its link, both ways streamed. Nothing listening there
 * within a few seconds: 502 PORT_NOT_LISTENING. And the ports something listens on.
 */
export function registerPortProxy(router: Router, manager: SandboxManager, authorize: (ctx: { req: RequestContext['req'] }) => void, serve: ServeRoute): void {
  const target = async (ctx: UpgradeContext): Promise<{ live: LiveSandbox; to: ProxyTarget }> => {
    authorize(ctx);
    const port = parseWith(PreviewPortSchema, ctx.params.port, 'port');
    const live = await manager.getAlive(ctx.params.sandboxId!);
    // A full checkpoint resets the node's connections into the sandbox first: new ones wait for it.
    if (live.pendingCall) await live.pendingCall.catch(() => undefined);
    const host = live.record.sandboxIp;
    const asked = Number(ctx.req.headers[listenWaitHeader]);
    const waitMs = Number.isFinite(asked) && asked > 0 ? Math.min(asked, longestListenWaitMs) : listenWaitMs;
    if (!(await waitForListener(host, port, waitMs)))
      throw new SpaceError(ErrorCode.PORT_NOT_LISTENING, `nothing listens on port ${port} of the sandbox (waited ${waitMs / 1000} s)`);
    const forwarded = ctx.req.headers[forwardedAuthorizationHeader];
    return {
      live,
      to: {
        host,
        port,
        path: `/${ctx.params['*']}${ctx.url.search}`,
        drop: ['authorization', forwardedAuthorizationHeader, listenWaitHeader],
        headers: typeof forwarded === 'string' ? { authorization: forwarded } : {},
        agent: live.inbound.agent,
      },
    };
  };
  router.proxy(nodePortProxyPath, {
    request: async (ctx) => {
      const { to } = await target(ctx);
      await proxyRequest(ctx.req, ctx.res, to);
    },
    upgrade: async (ctx, socket, head) => {
      const { live, to } = await target(ctx);
      const upstream = await proxyUpgrade(ctx.req, socket, head, to);
      live.inbound.track(upstream);
      // Reset before a full checkpoint, or the sandbox killed under it (which never closes it).
      upstream.once('close', () => socket.destroy());
      socket.once(
        'close',
        onSandboxDeath(live, () => socket.destroy()),
      );
    },
  });

  serve(nodeRoutes.listeningPorts, async ({ params }) => {
    const live = await manager.getAlive(params.sandboxId);
    const { stdout } = await callDaemon(live, () => manager.run(live, ['cat', '/proc/net/tcp', '/proc/net/tcp6']));
    // Read from inside the sandbox: checked against the reply's schema here too, as before the table.
    return nodeRoutes.listeningPorts.response.parse({ ports: listeningPorts(stdout) });
  });
}

/** Listening sockets from /proc/net/tcp{,6} (state 0A), the agent's own port left out, each port once. */
export function listeningPorts(procNetTcp: string): ListeningPort[] {
  const found = new Map<number, ListeningPort>();
  for (const line of procNetTcp.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if (fields[3] !== '0A' || !fields[1]?.includes(':')) continue;
    const [hexAddress, hexPort] = fields[1].split(':') as [string, string];
    const port = Number.parseInt(hexPort, 16);
    if (port === SandboxLayout.daemonPort || found.has(port)) continue;
    found.set(port, { port, address: hexAddress.length === 8 ? ipv4(hexAddress) : hexAddress === '0'.repeat(32) ? '::' : 'ipv6' });
  }
  return [...found.values()].sort((a, b) => a.port - b.port);
}

/** `0100007F` (little-endian hex, as /proc writes it) is 127.0.0.1. */
function ipv4(hex: string): string {
  return [6, 4, 2, 0].map((i) => Number.parseInt(hex.slice(i, i + 2), 16)).join('.');
}
