import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, describe, test } from 'node:test';
import { Api } from './client.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const run = promisify(execFile);

/** Every instruction the builder supports, on `base` (Debian: useradd, su, tar, python3). */
const dockerfile = (lastRun: string) => `# syntax is Docker's
ARG GREETING=hello
FROM base
LABEL org.example.team="agents" version=1
ENV APP_HOME=/srv/app \\
    GREETING=\${GREETING}
RUN useradd -m -s /bin/bash dev
WORKDIR $APP_HOME
COPY app/ ./
COPY --chown=dev:dev config.txt /etc/app/config.txt
ADD bundle.tar.gz /opt/
USER dev
RUN ${lastRun}
EXPOSE 8000
CMD ["sh", "-c", "echo \\"$(id -un) $(pwd) $GREETING\\" > /tmp/cmd-ran; exec python3 -m http.server 8000"]
`;

/** Dockerfile builds on real sandboxes: steps, the cache, the config a session starts with, failures. */
describe('templates built from Dockerfiles', () => {
  let platform: RunningPlatform;
  let admin: Api;
  const made: { api: Api; id: string }[] = [];
  const contextDir = mkdtempSync(path.join(tmpdir(), 'space-build-context-'));
  after(async () => {
    for (const { api, id } of made) await api.call('DELETE', `/v1/sessions/${id}`);
    rmSync(contextDir, { recursive: true, force: true });
  });
  platformForSuite([], (p, a) => ((platform = p), (admin = a)), { env: { SPACE_TEMPLATE_MAX_CONTEXT_MB: '1' } });

  async function newTenant(name: string): Promise<{ api: Api; key: string }> {
    const { id } = (await admin.call('POST', '/v1/tenants', { name })).body;
    const { key } = (await admin.call('POST', '/v1/keys', { tenantId: id })).body;
    return { api: new Api(platform.url, key), key };
  }

  /** Waits for the build to end; its log (followed over HTTP) and its final record. */
  async function finished(api: Api, name: string, id: string): Promise<{ log: string; build: any }> {
    const res = await fetch(`${platform.url}/v1/templates/${name}/builds/${id}/logs?follow=1`, { headers: { authorization: `Bearer ${api.key}` } });
    assert.equal(res.status, 200);
    const log = await res.text();
    return { log, build: (await api.call('GET', `/v1/templates/${name}/builds/${id}`)).body };
  }

  const context = () => {
    mkdirSync(path.join(contextDir, 'app'), { recursive: true });
    mkdirSync(path.join(contextDir, 'bundle'), { recursive: true });
    writeFileSync(path.join(contextDir, 'app/main.py'), 'print("main")\n');
    writeFileSync(path.join(contextDir, 'app/run.sh'), '#!/bin/sh\necho run\n', { mode: 0o755 });
    writeFileSync(path.join(contextDir, 'config.txt'), 'key=value\n');
    writeFileSync(path.join(contextDir, 'bundle/readme'), 'from the tarball\n');
  };

  test('every supported instruction: files, env, workdir, user, labels, the CMD running in a new session; secrets stay out; a rebuild reruns only the changed step', {
    timeout: 300_000,
  }, async () => {
    const { api, key } = await newTenant('builder');
    context();
    await run('tar', ['-czf', path.join(contextDir, 'bundle.tar.gz'), '-C', contextDir, 'bundle']);
    rmSync(path.join(contextDir, 'bundle'), { recursive: true });
    assert.equal((await api.call('PUT', '/v1/secrets/API_TOKEN', { value: 'the-real-secret', hosts: ['api.example.com'] })).status, 200);
    writeFileSync(path.join(contextDir, 'Dockerfile'), dockerfile('echo "built by $(id -un) in $(pwd) with $API_TOKEN" > /home/dev/built.txt'));
    const env = { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: key };
    const started = performance.now();
    const cli = await run(process.execPath, [cliMain, 'template', 'build', 'webapp', contextDir, '--secret', 'API_TOKEN', '--json'], { env });
    const coldMs = performance.now() - started;
    const build = JSON.parse(cli.stdout);
    assert.equal(build.status, 'succeeded', `${cli.stderr}\n${JSON.stringify(build)}`);
    assert.deepEqual([build.version, build.steps, build.cachedSteps], [1, 6, 0]);
    assert.match(cli.stderr, /\[1\/6\] line 7: RUN useradd/);
    assert.match(cli.stderr, /built template webapp v1/);

    const template = (await api.call('GET', '/v1/templates')).body.templates.find((t: { name: string }) => t.name === 'webapp');
    assert.deepEqual(template.config, {
      env: { APP_HOME: '/srv/app', GREETING: 'hello' },
      workdir: '/srv/app',
      user: 'dev',
      cmd: ['sh', '-c', 'echo "$(id -un) $(pwd) $GREETING" > /tmp/cmd-ran; exec python3 -m http.server 8000'],
      labels: { 'org.example.team': 'agents', version: '1' },
      expose: [8000],
    });
    assert.ok(
      (await api.call('GET', '/v1/templates')).body.templates.every((t: { name: string }) => !t.name.startsWith('_')),
      'cached steps are not listed',
    );

    const session = await api.createSession({ template: 'webapp', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    made.push({ api, id: session.id });
    const sh = async (script: string) => (await api.exec(session.id, ['sh', '-c', script])).stdout;
    assert.equal(await sh('cat /srv/app/main.py; test -x /srv/app/run.sh && echo executable'), 'print("main")\nexecutable\n');
    assert.equal(await sh('stat -c %U /etc/app/config.txt; cat /opt/bundle/readme; ls /opt'), 'dev\nfrom the tarball\nbundle\n', 'ADD unpacked the archive');
    assert.equal(await sh('echo $GREETING $APP_HOME'), 'hello /srv/app\n', "the template's ENV");
    const built = await sh('cat /home/dev/built.txt');
    assert.match(built, /^built by dev in \/srv\/app with /);
    assert.doesNotMatch(built, /the-real-secret/, 'the secret value never entered the build: only its placeholder');
    let ran = '';
    for (let i = 0; i < 50 && !ran; i++, await sleep(200)) ran = await sh('cat /tmp/cmd-ran 2>/dev/null || true');
    assert.equal(ran, 'dev /srv/app hello\n', 'the CMD runs as USER in WORKDIR with the ENV');
    const listing = await fetch(`${platform.url}/v1/sessions/${session.id}/ports/8000/`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(listing.status, 200, 'the CMD serves its port');
    assert.match(await listing.text(), /main\.py/);

    // Only the last RUN changed: everything before it comes from the cache.
    writeFileSync(path.join(contextDir, 'Dockerfile'), dockerfile('echo "second build" > /home/dev/built.txt'));
    const again = performance.now();
    const second = await api.call('POST', '/v1/templates', {
      name: 'webapp',
      dockerfile: dockerfile('echo "second build" > /home/dev/built.txt'),
      files: {
        'app/main.py': Buffer.from('print("main")\n').toString('base64'),
        'app/run.sh': Buffer.from('#!/bin/sh\necho run\n').toString('base64'),
        'config.txt': Buffer.from('key=value\n').toString('base64'),
        'bundle.tar.gz': readFileSync(path.join(contextDir, 'bundle.tar.gz')).toString('base64'),
      },
      executables: ['app/run.sh'],
    });
    assert.equal(second.status, 202, JSON.stringify(second.body));
    const rebuilt = await finished(api, 'webapp', second.body.id);
    const cachedMs = performance.now() - again;
    assert.deepEqual([rebuilt.build.status, rebuilt.build.version, rebuilt.build.steps, rebuilt.build.cachedSteps], ['succeeded', 2, 1, 5], rebuilt.log);
    assert.equal((rebuilt.log.match(/\(cached\)/g) ?? []).length, 5, rebuilt.log);
    assert.match(rebuilt.log, /--- build succeeded\n$/);
    process.stderr.write(`Dockerfile build of 6 steps: cold ${coldMs.toFixed(0)} ms (CLI), 5 of 6 cached ${cachedMs.toFixed(0)} ms\n`);
    const next = await api.createSession({ template: 'webapp', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    made.push({ api, id: next.id });
    assert.equal((await api.exec(next.id, 'cat /home/dev/built.txt /srv/app/main.py')).stdout, 'second build\nprint("main")\n');
    assert.equal(await sh('cat /home/dev/built.txt | cut -c1-8'), 'built by\n', 'running sessions keep their version');

    // Another tenant sees neither the template nor its builds.
    const stranger = (await newTenant('build-stranger')).api;
    assert.equal((await stranger.call('GET', `/v1/templates/webapp/builds/${second.body.id}`)).status, 404);
    assert.equal((await stranger.call('GET', `/v1/templates/webapp/builds/${second.body.id}/logs`)).status, 404);
    assert.ok((await stranger.call('GET', '/v1/templates')).body.templates.every((t: { name: string }) => t.name !== 'webapp'));
  });

  test('a failing step names its line and leaves no template; bad Dockerfiles, contexts and long builds are refused or cancelled', {
    timeout: 180_000,
  }, async () => {
    const { api } = await newTenant('build-failures');
    const sessionsBefore = (await api.call('GET', '/v1/sessions')).body.sessions.length;
    const failing = await api.call('POST', '/v1/templates', {
      name: 'broken',
      dockerfile: 'FROM tiny\nRUN echo fine\nRUN echo about to fail; exit 3\nRUN echo never',
    });
    assert.equal(failing.status, 202, JSON.stringify(failing.body));
    const failed = await finished(api, 'broken', failing.body.id);
    assert.equal(failed.build.status, 'failed');
    assert.match(failed.build.error, /^line 3 \(RUN echo about to fail; exit 3\): the command exited with 3: about to fail/);
    assert.match(failed.log, /about to fail\n/);
    assert.doesNotMatch(failed.log, /never/);
    assert.ok(
      (await api.call('GET', '/v1/templates')).body.templates.every((t: { name: string }) => t.name !== 'broken'),
      'no half template',
    );
    assert.equal((await api.call('GET', '/v1/sessions')).body.sessions.length, sessionsBefore, "the build's session is gone");

    const refused = async (body: Record<string, unknown>, status: number, pattern: RegExp) => {
      const reply = await api.call('POST', '/v1/templates', { name: 'bad', ...body });
      assert.equal(reply.status, status, JSON.stringify(reply.body));
      assert.match(reply.body.error.message, pattern);
    };
    await refused({ dockerfile: 'FROM tiny\nHEALTHCHECK CMD true' }, 400, /Dockerfile line 2: HEALTHCHECK is not supported/);
    await refused({ dockerfile: 'FROM tiny\nCOPY ../secret /x' }, 400, /line 2: COPY source \.\.\/secret is outside the build context/);
    await refused({ dockerfile: 'FROM tiny\nCOPY missing.txt /x' }, 400, /line 2: COPY source missing\.txt is not in the build context/);
    await refused({ dockerfile: 'FROM tiny', files: { '../x': 'eA==' } }, 400, /context paths are relative/);
    await refused({ dockerfile: 'FROM tiny', files: { big: Buffer.alloc(1.5 * 1024 * 1024).toString('base64') } }, 413, /SPACE_TEMPLATE_MAX_CONTEXT_MB/);
    await refused({ dockerfile: 'FROM tiny', fromCheckpoint: 'ckp_x' }, 400, /exactly one of/);
    const unknownBase = await api.call('POST', '/v1/templates', { name: 'bad', dockerfile: 'FROM nosuchtemplate\nRUN true' });
    assert.match((await finished(api, 'bad', unknownBase.body.id)).build.error, /unknown template "nosuchtemplate"/);

    const slow = await api.call('POST', '/v1/templates', { name: 'slow', dockerfile: 'FROM tiny\nRUN sleep 120', timeoutSec: 10 });
    const cancelled = await finished(api, 'slow', slow.body.id);
    assert.equal(cancelled.build.status, 'failed');
    assert.match(cancelled.build.error, /line 2 \(RUN sleep 120\): .*(out of time|timed out|killed)/i);
    assert.equal((await api.call('GET', '/v1/sessions')).body.sessions.length, sessionsBefore);
  });
});
