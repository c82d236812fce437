import {
  BuildIdSchema,
  BuildLogQuerySchema,
  CreateTemplateRequestSchema,
  DeleteTemplateQuerySchema,
  ErrorCode,
  ImportImageRequestSchema,
  Limits,
  SpaceError,
  TemplateNameSchema,
  builtinTemplateNames,
} from '@space/protocol';
import { type Router, parseQuery, parseWith, readJson, sendJson } from '@space/server-kit';
import type { Authenticator } from '../tenants/auth.js';
import { type TemplateBuilds, buildView } from '../builds/template-builds.js';
import type { TemplateCatalog } from '../templates/template-catalog.js';
import type { TemplateService } from '../builds/template-service.js';

export interface TemplateRouteDeps {
  catalog: TemplateCatalog;
  service: TemplateService;
  builds: TemplateBuilds;
  /** The largest build context, bytes: a request carries it base64 in JSON. */
  maxContextBytes: number;
}

/** The tenant's templates: made from sessions and checkpoints, or built from Dockerfiles (with their builds' logs). */
export function registerTemplateRoutes(router: Router, auth: Authenticator, deps: TemplateRouteDeps): void {
  const nameOf = (params: Record<string, string>) => parseWith(TemplateNameSchema, params.name, 'template name');

  router.on('POST', '/v1/templates', async ({ req, res }) => {
    const caller = await auth.authenticate(req);
    // Base64 makes the context a third larger; the Dockerfile and the rest fit in the usual bound.
    const request = await readJson(req, CreateTemplateRequestSchema, Math.ceil((deps.maxContextBytes * 4) / 3) + Limits.maxJsonBodyBytes);
    if (request.dockerfile !== undefined) sendJson(res, 202, await deps.builds.start(caller, { ...request, dockerfile: request.dockerfile }));
    else sendJson(res, 201, await deps.service.create(caller, request));
  });

  router.on('GET', '/v1/templates', async ({ req, res }) => {
    sendJson(res, 200, { templates: await deps.catalog.list((await auth.authenticate(req)).tenantId) });
  });

  router.on('DELETE', '/v1/templates/:name', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    const { force } = parseQuery(url, DeleteTemplateQuerySchema);
    await deps.service.delete(caller, nameOf(params), force === '1' || force === 'true');
    sendJson(res, 200, { ok: true });
  });

  // The body is the image archive (`docker save` or an OCI layout tar), streamed to a node; JSON `{image: "docker://…"}` pulls instead.
  router.on('POST', '/v1/templates/:name/image', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    const name = nameOf(params);
    if (builtinTemplateNames.includes(name)) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `${name} is a built-in template`);
    const json = String(req.headers['content-type'] ?? '').startsWith('application/json');
    const source = json ? await readJson(req, ImportImageRequestSchema) : { archive: req, length: req.headers['content-length'] };
    sendJson(res, 201, await deps.service.importImage(caller, name, source));
  });

  router.on('GET', '/v1/templates/:name/builds/:buildId', async ({ req, res, params }) => {
    const caller = await auth.authenticate(req);
    sendJson(res, 200, buildView(await deps.builds.get(caller, nameOf(params), parseWith(BuildIdSchema, params.buildId, 'build id'))));
  });

  router.on('GET', '/v1/templates/:name/builds/:buildId/logs', async ({ req, res, params, url }) => {
    const caller = await auth.authenticate(req);
    const { follow } = parseQuery(url, BuildLogQuerySchema);
    const id = parseWith(BuildIdSchema, params.buildId, 'build id');
    await deps.builds.get(caller, nameOf(params), id);
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
    const build = await deps.builds.followLog(
      caller,
      nameOf(params),
      id,
      follow === '1' || follow === 'true',
      (text) => res.write(text),
      () => res.closed,
    );
    res.end(`--- build ${build.status}${build.error ? `: ${build.error}` : ''}\n`);
  });
}
