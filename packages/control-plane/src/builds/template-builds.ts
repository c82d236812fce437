// A Dockerfile build from start to its template (steps, cache, heartbeat, cancel, the build session): one flow read top to bottom; parsing, context and step running are in files of their own.
import { createHash } from 'node:crypto';
import path from 'node:path';
import { CreateSessionRequestSchema, ErrorCode, SpaceError, newId, type CreateTemplateRequest, type TemplateBuild, type TemplateConfig } from '@space/protocol';
import { Space } from '@space/sdk';
import type { Authenticator, Caller } from '../tenants/auth.js';
import { type DockerfileStep, parseDockerfile, substitute } from './dockerfile.js';
import type { SessionCheckpointService } from '../sessions/session-checkpoint-service.js';
import type { SessionService } from '../sessions/session-service.js';
import type { Store, TemplateBuildPatch, TemplateBuildRow } from '../store/store.js';
import { BuildContext } from './build-context.js';
import { BuildLog } from './build-log.js';
import { BuildStepRunner } from './build-step-runner.js';
import type { TemplateCatalog } from '../templates/template-catalog.js';
import type { TemplateService } from './template-service.js';

/** The hidden template name of a build's cached steps (user names start with a letter). */
const cacheTemplateName = '_build-cache';
const defaultTimeoutSec = 1800;
/** How often a running build says it is alive, and how long without that it is taken for dead. */
const heartbeatMs = 10_000;
const staleMs = 60_000;

export interface TemplateBuildsOptions {
  /** `SPACE_TEMPLATE_MAX_CONTEXT_MB`: the most a build context may hold, bytes. */
  maxContextBytes: number;
  /** Cached steps kept per tenant; the oldest are deleted first. */
  cacheEntries: number;
}

export interface TemplateBuildsDeps {
  store: Store;
  sessions: SessionService;
  checkpoints: SessionCheckpointService;
  templates: TemplateService;
  catalog: TemplateCatalog;
  auth: Authenticator;
  /** This control plane on loopback: a build drives its sandbox through the public API, with a session token. */
  apiUrl: () => string;
  log: (message: string) => void;
}

/** What the Dockerfile's instructions have set so far. */
interface BuildState {
  env: Record<string, string>;
  args: Record<string, string>;
  workdir: string;
  user: string;
  entrypoint: string[] | string | null;
  cmd: string[] | string | null;
  labels: Record<string, string>;
  expose: number[];
}

/**
 * Templates built from Dockerfiles. Each build runs in the background in a SPACE session of the
 * tenant (egress through the gateway, the tenant's secrets by name): every RUN, COPY, ADD and
 * WORKDIR is a step whose result is cached by content (a hidden template keyed by the hash of
 * everything before and in it), so a rebuild reruns only from the first changed step. The result
 * is a new version of the template, with ENV, WORKDIR, USER, CMD/ENTRYPOINT, LABEL and EXPOSE as
 * its config. The build and its log are in the store, so any control plane can report them.
 */
export class TemplateBuilds {
  constructor(
    private readonly deps: TemplateBuildsDeps,
    private readonly options: TemplateBuildsOptions,
  ) {}

  /** Checks the Dockerfile and its context now (a mistake is a 400 with its line), then builds in the background. */
  async start(caller: Caller, request: CreateTemplateRequest & { dockerfile: string }): Promise<TemplateBuild> {
    const steps = parseDockerfile(request.dockerfile);
    const context = BuildContext.from(request.files ?? {}, request.executables ?? [], this.options.maxContextBytes);
    for (const step of steps) if (step.kind === 'COPY' || step.kind === 'ADD') context.check(step);
    const row: TemplateBuildRow = {
      id: newId('bld'),
      tenantId: caller.tenantId,
      name: request.name,
      status: 'running',
      createdAt: new Date().toISOString(),
      endedAt: null,
      error: null,
      version: null,
      steps: 0,
      cachedSteps: 0,
      log: '',
      sessionId: null,
      heartbeatAt: new Date().toISOString(),
    };
    await this.deps.store.insertBuild(row);
    void this.run(caller, row, steps, context, request).catch((err: Error) => this.deps.log(`build ${row.id}: ${err.stack ?? err.message}`));
    return buildView(row);
  }

  async get(caller: Caller, name: string, id: string): Promise<TemplateBuildRow> {
    const row = await this.deps.store.getBuild(caller.tenantId, id);
    if (!row || row.name !== name) throw new SpaceError(ErrorCode.TEMPLATE_NOT_FOUND, `template ${name} has no build ${JSON.stringify(id)}`);
    return row;
  }

  /** Writes the build's log; with `follow`, also what comes later, until the build ends or `stopped()`. */
  async followLog(caller: Caller, name: string, id: string, follow: boolean, write: (text: string) => void, stopped: () => boolean): Promise<TemplateBuild> {
    let row = await this.get(caller, name, id);
    let sent = 0;
    for (;;) {
      if (row.log.length > sent) {
        write(row.log.slice(sent));
        sent = row.log.length;
      }
      if (!follow || row.status !== 'running' || stopped()) return buildView(row);
      await new Promise((resolve) => setTimeout(resolve, 300));
      row = await this.get(caller, name, id);
    }
  }

  private async run(caller: Caller, row: TemplateBuildRow, steps: DockerfileStep[], context: BuildContext, request: CreateTemplateRequest): Promise<void> {
    const log = new BuildLog(this.deps.store, row.id);
    const deadline = Date.now() + (request.timeoutSec ?? defaultTimeoutSec) * 1000;
    let sessionId: string | null = null;
    let current: DockerfileStep | null = null;
    let outcome: TemplateBuildPatch = { status: 'failed' };
    // Alive while it runs: the maintenance of any control plane fails a build whose heartbeat stopped.
    const heartbeat = setInterval(
      () => void this.deps.store.updateBuild(row.id, { heartbeatAt: new Date().toISOString() }).catch(() => undefined),
      heartbeatMs,
    );
    heartbeat.unref();
    try {
      const from = steps.find((s) => s.kind === 'FROM') as Extract<DockerfileStep, { kind: 'FROM' }>;
      const state: BuildState = { env: {}, args: { ...request.buildArgs }, workdir: '/', user: 'root', entrypoint: null, cmd: null, labels: {}, expose: [] };
      for (const step of steps.slice(0, steps.indexOf(from))) applyArg(state, step as Extract<DockerfileStep, { kind: 'ARG' }>);
      const base = await this.deps.catalog.forNewSession(caller.tenantId, substitute(from.image, state.args));
      inherit(state, base.config);
      const fileSteps = steps.filter(isFileStep).length;
      log.line(`building template ${row.name} from ${from.image}: ${fileSteps} step(s) that change files`);
      let cacheKey = hash(`from ${base.template}`);
      let startFrom = base.template;
      let runner: BuildStepRunner | null = null;
      let lastCheckpoint: string | null = null;
      let done = 0;
      for (const step of steps.slice(steps.indexOf(from) + 1)) {
        current = step;
        if (Date.now() > deadline)
          throw new SpaceError(ErrorCode.REQUEST_TIMEOUT, `the build took longer than ${request.timeoutSec ?? defaultTimeoutSec} s (timeoutSec)`);
        if (!isFileStep(step)) {
          applyMetadata(state, step);
          cacheKey = hash(cacheKey, step.text, JSON.stringify(state.args));
          continue;
        }
        done++;
        if (step.kind === 'WORKDIR') state.workdir = path.posix.resolve(state.workdir, substitute(step.path, { ...state.args, ...state.env }));
        cacheKey = hash(
          cacheKey,
          step.text,
          JSON.stringify([state.env, state.args, state.workdir, state.user]),
          step.kind === 'COPY' || step.kind === 'ADD' ? context.digest(step, state) : '',
        );
        const label = `[${done}/${fileSteps}] line ${step.line}: ${step.text.slice(0, 200)}`;
        if (!runner) {
          const cached = await this.cached(caller, cacheKey);
          if (cached) {
            startFrom = cached;
            row.cachedSteps++;
            log.line(`${label}  (cached)`);
            continue;
          }
          sessionId = await this.openSession(caller, startFrom, request);
          await this.deps.store.updateBuild(row.id, { sessionId });
          const { token } = await this.deps.auth.createSessionToken(caller.tenantId, sessionId);
          runner = new BuildStepRunner(new Space({ apiUrl: this.deps.apiUrl(), apiKey: token }).sessions.handle(sessionId), context, log);
        }
        log.line(label);
        const started = performance.now();
        await runner.run(step, state, deadline);
        lastCheckpoint = (await this.deps.checkpoints.create(caller, sessionId!, 'fs')).id;
        await this.remember(caller, cacheKey, lastCheckpoint);
        row.steps++;
        log.line(`  done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      }
      current = null;
      // Every step from the cache (or none changed files): the template is made from the last cached step.
      if (!lastCheckpoint) {
        sessionId = await this.openSession(caller, startFrom, request);
        lastCheckpoint = (await this.deps.checkpoints.create(caller, sessionId, 'fs')).id;
      }
      const version = await this.deps.templates.createVersion(caller, row.name, lastCheckpoint, configOf(state));
      outcome = { status: 'succeeded', version: version.version };
      log.line(`built template ${row.name} v${version.version} (${row.steps} step(s) run, ${row.cachedSteps} from the cache)`);
    } catch (err) {
      const where = current ? `line ${current.line} (${current.text.slice(0, 120)}): ` : '';
      outcome = { status: 'failed', error: `${where}${(err as Error).message}` };
      log.line(`build failed at ${outcome.error}`);
    }
    clearInterval(heartbeat);
    // Its session goes first, then the log's end, then the status: whoever sees the build ended sees all of it done.
    if (sessionId)
      await this.deps.sessions.delete(caller, sessionId).catch((err: Error) => this.deps.log(`build ${row.id}: could not delete its session: ${err.message}`));
    await log.close();
    await this.deps.store.updateBuild(row.id, { ...outcome, endedAt: new Date().toISOString(), steps: row.steps, cachedSteps: row.cachedSteps });
  }

  /**
   * Fails the builds whose control plane died (no heartbeat for `staleMs`) and deletes their
   * sessions; the maintenance of any control plane runs it. Returns how many.
   */
  async failStale(now = Date.now()): Promise<number> {
    const stale = await this.deps.store.listStaleBuilds(new Date(now - staleMs).toISOString());
    for (const build of stale) {
      const caller = { tenantId: build.tenantId, admin: false };
      if (build.sessionId) await this.deps.sessions.delete(caller, build.sessionId).catch(() => undefined);
      await this.deps.store.updateBuild(build.id, {
        status: 'failed',
        endedAt: new Date(now).toISOString(),
        error: `the control plane running the build stopped (no heartbeat for ${staleMs / 1000} s): build again`,
      });
    }
    return stale.length;
  }

  /** The build's session: on the base or the last cached step, no automatic checkpoints, the tenant's named secrets. */
  private async openSession(caller: Caller, template: string, request: CreateTemplateRequest): Promise<string> {
    const parsed = CreateSessionRequestSchema.parse({
      checkpointIntervalSec: 0,
      fullCheckpointIntervalSec: 0,
      idleTimeoutSec: 0,
      secrets: request.secrets ?? [],
      resources: request.resources ?? {},
      metadata: { 'space.build': 'true' },
    });
    return (await this.deps.sessions.create(caller, { ...parsed, template })).id;
  }

  /** The hidden template of a cached step, if it still exists. */
  private async cached(caller: Caller, key: string): Promise<string | null> {
    const entry = await this.deps.store.getBuildCache(caller.tenantId, key);
    if (!entry) return null;
    if (await this.deps.catalog.version(caller.tenantId, entry.templateId)) return entry.templateId;
    await this.deps.store.deleteBuildCache(caller.tenantId, key);
    return null;
  }

  /** Keeps the step's result as a hidden template; the tenant's oldest cached steps beyond the bound are deleted. */
  private async remember(caller: Caller, key: string, checkpointId: string): Promise<void> {
    const version = await this.deps.templates.createVersion(caller, cacheTemplateName, checkpointId, null);
    await this.deps.store.putBuildCache({ tenantId: caller.tenantId, key, templateId: version.id, createdAt: new Date().toISOString() });
    const entries = await this.deps.store.listBuildCache(caller.tenantId);
    for (const old of entries.slice(0, Math.max(0, entries.length - this.options.cacheEntries))) {
      await this.deps.store.deleteBuildCache(caller.tenantId, old.key);
      const template = await this.deps.catalog.version(caller.tenantId, old.templateId);
      if (template) await this.deps.templates.deleteVersion(template).catch(() => undefined);
    }
  }
}

function isFileStep(step: DockerfileStep): step is Extract<DockerfileStep, { kind: 'RUN' | 'COPY' | 'ADD' | 'WORKDIR' }> {
  return step.kind === 'RUN' || step.kind === 'COPY' || step.kind === 'ADD' || step.kind === 'WORKDIR';
}

function hash(...parts: string[]): string {
  const h = createHash('sha256');
  for (const part of parts) h.update(part).update('\0');
  return h.digest('hex');
}

function applyArg(state: BuildState, step: Extract<DockerfileStep, { kind: 'ARG' }>): void {
  if (state.args[step.name] === undefined && step.defaultValue !== null) state.args[step.name] = substitute(step.defaultValue, state.args);
  state.args[step.name] ??= '';
}

/** A custom base template's config is where the build starts (a built-in has none). */
function inherit(state: BuildState, config: TemplateConfig | null): void {
  if (!config) return;
  Object.assign(state, {
    env: { ...config.env },
    workdir: config.workdir,
    user: config.user,
    cmd: config.cmd,
    labels: { ...config.labels },
    expose: [...config.expose],
  });
}

/** Instructions that only change the build's state; WORKDIR also makes its directory (a file step). */
function applyMetadata(state: BuildState, step: DockerfileStep): void {
  const vars = { ...state.args, ...state.env };
  switch (step.kind) {
    case 'ARG':
      return applyArg(state, step);
    case 'ENV':
      for (const [name, value] of step.pairs) state.env[name] = substitute(value, { ...state.args, ...state.env });
      return;
    case 'LABEL':
      for (const [name, value] of step.pairs) state.labels[substitute(name, vars)] = substitute(value, vars);
      return;
    case 'USER':
      state.user = substitute(step.user, vars);
      return;
    case 'EXPOSE':
      for (const port of step.ports) {
        const number = Number(substitute(port, vars).split('/')[0]);
        if (Number.isInteger(number) && number > 0 && number < 65536 && !state.expose.includes(number)) state.expose.push(number);
      }
      return;
    case 'ENTRYPOINT':
      state.entrypoint = step.command;
      // As in Docker: a new ENTRYPOINT drops the CMD set before it.
      state.cmd = null;
      return;
    case 'CMD':
      state.cmd = step.command;
      return;
  }
}

/** What the template's sessions start with: ENTRYPOINT with CMD as its arguments (exec form), else the CMD. */
function configOf(state: BuildState): TemplateConfig {
  const asArgv = (c: string[] | string): string[] => (typeof c === 'string' ? ['/bin/sh', '-c', c] : c);
  let cmd: string[] | null = null;
  if (state.entrypoint) cmd = typeof state.entrypoint === 'string' ? asArgv(state.entrypoint) : [...state.entrypoint, ...(state.cmd ? asArgv(state.cmd) : [])];
  else if (state.cmd) cmd = asArgv(state.cmd);
  return { env: state.env, workdir: state.workdir, user: state.user, cmd, labels: state.labels, expose: state.expose };
}

/** A build as the API shows it. */
export function buildView(row: TemplateBuildRow): TemplateBuild {
  const { tenantId: _tenant, log: _log, sessionId: _session, heartbeatAt: _heartbeat, ...build } = row;
  return build;
}
