import { ServerStreamMessageSchema, WatchEventSchema, nodeSandboxPrefix, sandboxRoutes } from '@space/protocol';
import {
  CallDeadline,
  type Router,
  closeWithError,
  daemonAnswerBoundMs,
  forwardRoute,
  parseQuery,
  readRouteInput,
  relaySockets,
  routePath,
  toSpaceError,
  type RequestContext,
  type UpgradeContext,
} from '@space/server-kit';
import type { SandboxManager } from '../sandbox/sandbox-manager.js';
import { onSandboxDeath } from '../sandbox/daemon-calls.js';

/**
 * Registers `/node/v1/sandboxes/:sandboxId/<op>` for every sandbox operation: requests are
 * validated, forwarded to the sandbox's daemon, and the daemon's replies are validated and bounded
 * before they are passed up.
 */
export function registerSandboxProxy(router: Router, manager: SandboxManager, authorize: (ctx: { req: RequestContext['req'] }) => void): void {
  for (const route of sandboxRoutes) {
    const pattern = `${nodeSandboxPrefix}${route.path}`;
    if (route.kind === 'websocket') {
      const guard = async (ctx: UpgradeContext): Promise<void> => {
        authorize(ctx);
        if (route.query) parseQuery(ctx.url, route.query);
        await manager.getAlive(ctx.params.sandboxId!);
      };
      router.socket(pattern, guard, (client, ctx) => {
        try {
          const live = manager.get(ctx.params.sandboxId!);
          // Any stream may run something (a watch too counts: entries are not told apart by path).
          const leave = live.entries.enter();
          if (client.readyState === client.CLOSED) leave();
          else client.once('close', leave);
          const upstream = live.daemon.socket(routePath(route, ctx.params) + ctx.url.search);
          const schema = route.path === '/files/watch' ? WatchEventSchema : ServerStreamMessageSchema;
          relaySockets(client, upstream, { label: 'daemon', validateUpstream: (m) => schema.safeParse(m).success });
          // A sandbox killed under the stream never closes it: the stream is ended, and the client re-attaches or resumes.
          upstream.once(
            'close',
            onSandboxDeath(live, () => upstream.terminate()),
          );
        } catch (err) {
          const e = toSpaceError(err);
          closeWithError(client, e.code, e.message);
        }
      });
      continue;
    }
    router.on(route.method, pattern, async (ctx) => {
      authorize(ctx);
      const sandboxId = ctx.params.sandboxId!;
      const input = await readRouteInput(route, ctx);
      // The control plane's caller's budget: a call that waited here past it (or whose caller left) is not run.
      const deadline = CallDeadline.of(ctx.req, ctx.res, Number.POSITIVE_INFINITY);
      const live = await manager.getAlive(sandboxId);
      deadline.check(`sandbox ${sandboxId} on this node`);
      // Reads (GET) write nothing in the sandbox: they leave it quiet.
      const leave = route.method === 'GET' ? null : live.entries.enter();
      try {
        // A daemon silent past its bound has its sandbox checked (`callAlive`): a wedged one is stopped.
        const answerWithinMs = daemonAnswerBoundMs(route, input.body);
        await manager.callAlive(live, () => forwardRoute(route, ctx, input, live.daemon, routePath(route, ctx.params), {}, answerWithinMs));
      } finally {
        leave?.();
      }
    });
  }
}
