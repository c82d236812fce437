import { ErrorCode, SpaceError, StartSandboxRequestSchema, type NodeHealth } from '@space/protocol';
import { Router, bearerToken, readJson, secretsEqual, sendJson } from '@space/server-kit';
import type { IncomingMessage } from 'node:http';
import type { SandboxManager } from '../sandbox-manager.js';
import type { TemplateStore } from '../templates/template-store.js';
import { registerSandboxProxy } from './sandbox-proxy.js';

export interface NodeApiDeps {
  nodeId: string;
  token: string;
  manager: SandboxManager;
  templates: TemplateStore;
}

/**
 * The node API: what the control plane uses, locally or across the network. Every route needs the
 * node token.
 */
export function createNodeApi(deps: NodeApiDeps): Router {
  const { manager } = deps;
  const authorize = (ctx: { req: IncomingMessage }): void => {
    const token = bearerToken(ctx.req);
    if (!token || !secretsEqual(token, deps.token)) throw new SpaceError(ErrorCode.UNAUTHORIZED, 'node token missing or wrong');
  };
  const router = new Router();

  router.on('GET', '/node/v1/health', (ctx) => {
    authorize(ctx);
    const health: NodeHealth = { nodeId: deps.nodeId, templates: deps.templates.names(), sandboxes: manager.list().length };
    sendJson(ctx.res, 200, health);
  });

  router.on('GET', '/node/v1/sandboxes', (ctx) => {
    authorize(ctx);
    sendJson(ctx.res, 200, { sandboxes: manager.list() });
  });

  router.on('POST', '/node/v1/sandboxes', async (ctx) => {
    authorize(ctx);
    const request = await readJson(ctx.req, StartSandboxRequestSchema);
    deps.templates.recipe(request.template);
    sendJson(ctx.res, 201, await manager.start(request));
  });

  router.on('GET', '/node/v1/sandboxes/:sandboxId', async (ctx) => {
    authorize(ctx);
    sendJson(ctx.res, 200, await manager.info(ctx.params.sandboxId!));
  });

  router.on('DELETE', '/node/v1/sandboxes/:sandboxId', async (ctx) => {
    authorize(ctx);
    await manager.stop(ctx.params.sandboxId!);
    sendJson(ctx.res, 200, { ok: true });
  });

  router.on('DELETE', '/node/v1/volumes/:sessionId', async (ctx) => {
    authorize(ctx);
    await manager.deleteVolume(ctx.params.sessionId!);
    sendJson(ctx.res, 200, { ok: true });
  });

  registerSandboxProxy(router, manager, authorize);
  return router;
}
