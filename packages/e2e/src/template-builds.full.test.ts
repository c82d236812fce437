import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, describe, test } from 'node:test';
import { Api, collectSocket, decodeOutput } from './client.js';
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
describe('templates built from Dockerfiles and imported from images', () => {
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
    // The CLI leaves out what .dockerignore names (the rebuild below, sent without them, is cached).
    writeFileSync(path.join(contextDir, '.dockerignore'), '# local only\napp/*.local\nscratch\n');
    writeFileSync(path.join(contextDir, 'app/notes.local'), 'not for the template\n');
    mkdirSync(path.join(contextDir, 'scratch'), { recursive: true });
    writeFileSync(path.join(contextDir, 'scratch/big.bin'), Buffer.alloc(1024 * 1024));
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
    assert.equal(await sh('ls /srv/app'), 'main.py\nrun.sh\n', '.dockerignore left app/notes.local out');
    assert.equal(await sh('stat -c %U /etc/app/config.txt; cat /opt/bundle/readme; ls /opt'), 'dev\nfrom the tarball\nbundle\n', 'ADD unpacked the archive');
    assert.equal(await sh('echo $GREETING $APP_HOME'), 'hello /srv/app\n', "the template's ENV");
    // WORKDIR is where exec and PTYs run without a cwd (as `docker run` does), on every kind of start.
    assert.equal(session.cwd, '/srv/app');
    assert.equal((await api.exec(session.id, 'pwd')).stdout, '/srv/app\n');
    assert.equal((await api.exec(session.id, 'pwd', { cwd: '/tmp' })).stdout, '/tmp\n', 'a cwd given still wins');
    const terminal = await collectSocket(api.socket(`/v1/sessions/${session.id}/pty`), (ws) => {
      ws.send(JSON.stringify({ type: 'start', cmd: ['/bin/sh', '-c', 'pwd'], cols: 80, rows: 24 }));
    });
    assert.match(decodeOutput(terminal, 'stdout'), /^\/srv\/app\r?\n/);
    const built = await sh('cat /home/dev/built.txt');
    assert.match(built, /^built by dev in \/srv\/app with /);
    assert.doesNotMatch(built, /the-real-secret/, 'the secret value never entered the build: only its placeholder');
    let ran = '';
    for (let i = 0; i < 50 && !ran; i++, await sleep(200)) ran = await sh('cat /tmp/cmd-ran 2>/dev/null || true');
    assert.equal(ran, 'dev /srv/app hello\n', 'the CMD runs as USER in WORKDIR with the ENV');
    const listing = await fetch(`${platform.url}/v1/sessions/${session.id}/ports/8000/`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(listing.status, 200, 'the CMD serves its port');
    assert.match(await listing.text(), /main\.py/);
    const checkpoint = (await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, {})).body;
    const [fork] = (await api.call('POST', `/v1/checkpoints/${checkpoint.id}/fork`, { count: 1 })).body.sessions;
    made.push({ api, id: fork.id });
    assert.deepEqual([fork.cwd, (await api.exec(fork.id, 'pwd')).stdout], ['/srv/app', '/srv/app\n'], 'a fork keeps its WORKDIR');
    assert.equal((await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`)).status, 200);
    assert.equal(await sh('pwd'), '/srv/app\n', 'and so does a sandbox booted after a kill');

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

  test('an image made here (OCI layout and docker save archive) imports with its config; device nodes are dropped, setuid bits kept inside; a Dockerfile builds FROM it', {
    timeout: 180_000,
  }, async () => {
    const { api, key } = await newTenant('importer');
    const dir = mkdtempSync(path.join(tmpdir(), 'space-image-'));
    try {
      // A busybox image built with umoci, as a registry-less machine would.
      const layout = path.join(dir, 'layout');
      const bundle = path.join(dir, 'bundle');
      await run('umoci', ['init', '--layout', layout]);
      await run('umoci', ['new', '--image', `${layout}:v1`]);
      await run('umoci', ['unpack', '--image', `${layout}:v1`, bundle]);
      const root = path.join(bundle, 'rootfs');
      for (const d of ['bin', 'app', 'dev']) mkdirSync(path.join(root, d), { recursive: true });
      await run('cp', ['/bin/busybox', path.join(root, 'bin/busybox')]);
      for (const applet of ['sh', 'cat', 'echo', 'id', 'sleep', 'stat', 'ls', 'pwd']) await run('ln', ['-s', 'busybox', path.join(root, 'bin', applet)]);
      await run('cp', ['/bin/busybox', path.join(root, 'bin/suid-tool')]);
      await run('chmod', ['4755', path.join(root, 'bin/suid-tool')]);
      await run('mknod', [path.join(root, 'dev/evil'), 'c', '1', '3']);
      writeFileSync(path.join(root, 'app/hello'), 'hello from the image\n');
      await run('umoci', ['repack', '--image', `${layout}:v1`, bundle]);
      await run('umoci', [
        'config',
        '--image',
        `${layout}:v1`,
        '--config.env',
        'GREETING=from-image',
        '--config.env',
        'PATH=/bin',
        '--config.workingdir',
        '/app',
        '--config.entrypoint',
        'sh',
        '--config.entrypoint',
        '-c',
        '--config.cmd',
        'echo "$(id -u) $(pwd) $GREETING" > /tmp/image-cmd; exec sleep 3600',
        '--config.label',
        'team=agents',
        '--config.exposedports',
        '8080/tcp',
      ]);
      const ociTar = path.join(dir, 'oci.tar');
      await run('tar', ['-cf', ociTar, '-C', layout, '.']);
      const dockerTar = path.join(dir, 'docker.tar');
      await run('skopeo', ['copy', '--quiet', `oci:${layout}:v1`, `docker-archive:${dockerTar}:space/test:v1`]);

      const upload = (name: string, file: string) =>
        fetch(`${platform.url}/v1/templates/${name}/image`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-tar' },
          body: readFileSync(file),
        });
      const started = performance.now();
      const imported = await upload('busy', ociTar);
      const importMs = performance.now() - started;
      const template = (await imported.json()) as any;
      assert.equal(imported.status, 201, JSON.stringify(template));
      assert.deepEqual([template.name, template.version, template.source, template.fromCheckpoint], ['busy', 1, 'image', null]);
      assert.deepEqual(template.config, {
        env: { GREETING: 'from-image', PATH: '/bin' },
        workdir: '/app',
        user: 'root',
        cmd: ['sh', '-c', 'echo "$(id -u) $(pwd) $GREETING" > /tmp/image-cmd; exec sleep 3600'],
        labels: { team: 'agents' },
        expose: [8080],
      });
      process.stderr.write(`image import (OCI layout tar, busybox): ${importMs.toFixed(0)} ms\n`);
      const customDir = `${platform.dataDir}/btrfs/templates/custom`;
      assert.equal((await run('find', [customDir, '-name', 'evil'])).stdout, '', 'device nodes are not kept');

      const session = await api.createSession({ template: 'busy', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
      made.push({ api, id: session.id });
      const sh = async (id: string, script: string) => (await api.exec(id, ['/bin/sh', '-c', script])).stdout;
      assert.equal(await sh(session.id, 'cat /app/hello; stat -c %a /bin/suid-tool'), 'hello from the image\n4755\n');
      let ran = '';
      for (let i = 0; i < 50 && !ran; i++, await sleep(200)) ran = await sh(session.id, 'cat /tmp/image-cmd 2>/dev/null || true');
      assert.equal(ran, '0 /app from-image\n', "the image's entrypoint and cmd run in its workdir with its env");

      const fromDocker = await upload('busy-docker', dockerTar);
      assert.equal(fromDocker.status, 201, await fromDocker.clone().text());
      const dockerSession = await api.createSession({ template: 'busy-docker', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
      made.push({ api, id: dockerSession.id });
      assert.equal(await sh(dockerSession.id, 'cat /app/hello'), 'hello from the image\n');

      // A Dockerfile builds on it, and keeps its config unless it changes it.
      const built = await api.call('POST', '/v1/templates', { name: 'busy-plus', dockerfile: 'FROM busy\nRUN echo layered > /app/layer\nENV EXTRA=1' });
      const result = await finished(api, 'busy-plus', built.body.id);
      assert.equal(result.build.status, 'succeeded', result.log);
      const plus = (await api.call('GET', '/v1/templates')).body.templates.find((t: { name: string }) => t.name === 'busy-plus');
      assert.deepEqual(
        [plus.source, plus.config.env, plus.config.cmd],
        ['dockerfile', { GREETING: 'from-image', PATH: '/bin', EXTRA: '1' }, template.config.cmd],
      );

      // Not an image; another tenant cannot use it; the CLI imports too.
      const garbage = path.join(dir, 'garbage.tar');
      writeFileSync(garbage, 'not a tar at all');
      const refused = await upload('junk', garbage);
      assert.equal(refused.status, 400);
      assert.match(((await refused.json()) as any).error.message, /not a tar archive/);
      const stranger = (await newTenant('import-stranger')).api;
      assert.equal((await stranger.call('POST', '/v1/sessions', { template: 'busy' })).body.error.code, 'UNKNOWN_TEMPLATE');
      const cli = await run(process.execPath, [cliMain, 'template', 'import', 'busy', ociTar, '--json'], {
        env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: key },
      });
      assert.equal(JSON.parse(cli.stdout).version, 2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
