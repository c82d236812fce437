import type { Router } from '@space/server-kit';
import type { Authenticator } from '../tenants/auth.js';
import type { TenantEvents } from '../tenants/tenant-events.js';

/** A comment line now and then keeps proxies from closing a quiet stream. */
const keepaliveMs = 15_000;

/** `GET /v1/events`: the tenant's events as server-sent events, for the console and the SDK. */
export function registerEventRoutes(router: Router, auth: Authenticator, events: TenantEvents): void {
  router.on('GET', '/v1/events', async ({ req, res }) => {
    const caller = await auth.authenticate(req);
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    res.write(": the tenant's events\nretry: 2000\n\n");
    const unsubscribe = events.subscribe(caller.tenantId, (event) => res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`));
    const keepalive = setInterval(() => res.write(': keepalive\n\n'), keepaliveMs);
    await new Promise<void>((resolve) => res.once('close', resolve));
    clearInterval(keepalive);
    unsubscribe();
  });
}
