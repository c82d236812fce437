import type { ApiRoute, RouteInput, RouteReply } from '@space/protocol';
import { parseQuery, parseWith, readJson } from './body.js';
import { sendJson } from './respond.js';
import type { RequestContext, Router } from './router.js';

export type RouteHandler<R extends ApiRoute> = (input: RouteInput<R>, ctx: RequestContext) => Promise<RouteReply<R>> | RouteReply<R>;

/**
 * Registers one operation of a route table: `before` runs first (authorization), then the params,
 * the JSON body and the query are checked with the route's schemas and the handler's result is
 * sent with the route's status. A `binary` route's body is left for the handler to stream.
 */
export function serveRoute<R extends ApiRoute>(router: Router, route: R, before: (ctx: RequestContext) => void, handler: RouteHandler<R>): void {
  router.on(route.method, route.path, async (ctx) => {
    before(ctx);
    const params: Record<string, unknown> = { ...ctx.params };
    for (const [name, schema] of Object.entries(route.params ?? {}))
      params[name] = parseWith(schema, ctx.params[name], name.replace(/([A-Z])/g, ' $1').toLowerCase());
    const input: Record<string, unknown> = { params };
    if (route.body && route.transport !== 'binary') input.body = await readJson(ctx.req, route.body);
    if (route.query) input.query = parseQuery(ctx.url, route.query);
    const reply = await handler(input as RouteInput<R>, ctx);
    // A download's handler has written its reply itself.
    if (route.transport !== 'download') sendJson(ctx.res, route.status, reply);
  });
}

/** `serveRoute` bound to one router and its authorization, as an API's route files take it. */
export type ServeRoute = <R extends ApiRoute>(route: R, handler: RouteHandler<R>) => void;
