import { sandboxRoutes } from '@space/protocol';
import { type Router, parseQuery, closeWithError, holdMessages, readRouteInput, relaySockets, toSpaceError } from '@space/server-kit';
import type { Authenticator } from '../tenants/auth.js';
import { bindStream } from './stream-binding.js';
import type { SessionCalls } from '../sessions/session-calls.js';
import type { SessionService } from '../sessions/session-service.js';
import type { CellCheckpoints } from '../sessions/cell-checkpoints.js';

/** How long the session read before a call's body may stand for the call's own read (longer: read again). */
const freshReadMs = 250;

/**
 * `/v1/sessions/:id/<op>` for every sandbox operation: validated here, routed by session id to the
 * node serving it. JSON operations survive a sandbox death (the sandbox is resumed and the call
 * repeated); streams and uploads resume on the next call, and a stream re-attached after a death
 * finds its own process or SANDBOX_DIED (stream-binding.ts).
 */
export function registerSandboxRoutes(router: Router, auth: Authenticator, sessions: SessionService, calls: SessionCalls, cells: CellCheckpoints): void {
  for (const route of sandboxRoutes) {
    const pattern = `/v1/sessions/:sessionId${route.path}`;
    if (route.kind === 'websocket') {
      router.socket(
        pattern,
        async (ctx) => {
          await sessions.row(await auth.authenticate(ctx.req), ctx.params.sessionId!);
          if (route.query) parseQuery(ctx.url, route.query);
        },
        (client, ctx) => {
          const release = holdMessages(client);
          // An open stream is a call in progress: the session is not idle while it lasts.
          client.once('close', calls.trackStream(ctx.params.sessionId!));
          auth
            .authenticate(ctx.req)
            .then((caller) =>
              calls.withSandbox(caller, ctx.params.sessionId!, { repeatable: false }, async (target) => {
                const { rewrite } = bindStream(route, ctx.url, ctx.params, target.sandboxId);
                relaySockets(client, target.node.socket(route, ctx, target.sandboxId), { label: 'node', early: release(), rewriteUpstream: rewrite });
              }),
            )
            .catch((err: unknown) => {
              const e = toSpaceError(err);
              closeWithError(client, e.code, e.message);
            });
        },
      );
      continue;
    }
    router.on(route.method, pattern, async (ctx) => {
      const caller = await auth.authenticate(ctx.req);
      // A 404 before any body is read; the read serves the call too when the body came at once (a JSON one, bounded).
      const read = await sessions.rowWithLease(caller, ctx.params.sessionId!);
      const readAt = performance.now();
      const input = await readRouteInput(route, ctx);
      const fresh = route.kind === 'json' && performance.now() - readAt < freshReadMs;
      const options = { repeatable: route.kind === 'json', deadline: calls.deadline(ctx.req, ctx.res), ...(fresh ? { read } : {}) };
      const final = await calls.withSandbox(caller, ctx.params.sessionId!, options, (target) => target.node.forward(route, ctx, input, target.sandboxId));
      if (route.kind === 'events' && final !== null) await cells.ended(caller, ctx.params.sessionId!);
    });
  }
}
