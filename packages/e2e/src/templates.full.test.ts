import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { describe, test } from 'node:test';
import { Api } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

/** A tenant's templates made from its sessions and checkpoints, on real btrfs snapshots and sandboxes. */
describe('templates from sessions and checkpoints', () => {
  let platform: RunningPlatform;
  let admin: Api;
  const sessions: string[] = [];

  platformForSuite(sessions, (p, a) => ((platform = p), (admin = a)));

  async function newTenant(name: string): Promise<Api> {
    const { id } = (await admin.call('POST', '/v1/tenants', { name })).body;
    return new Api(platform.url, (await admin.call('POST', '/v1/keys', { tenantId: id })).body.key);
  }

  async function created(api: Api, template: string): Promise<string> {
    const session = await api.createSession({ template, checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(session.id);
    return session.id;
  }

  const customTemplates = (): string[] => readdirSync(`${platform.dataDir}/btrfs/templates/custom`).sort();

  test('base has what an agent reaches for first: pip (system-wide and in a venv) and npm, whose installs go through the gateway', {
    timeout: 180_000,
  }, async () => {
    const id = await created(admin, 'base');
    const sh = async (script: string, timeoutMs = 60_000) => {
      const r = await admin.exec(id, ['bash', '-c', script], { timeoutMs });
      assert.equal(r.exitCode, 0, `${script}: ${r.stdout}${r.stderr}`);
      return r.stdout;
    };
    assert.match(await sh('pip --version; npm --version; npx --version'), /^pip \d+.*\n10\.9\.2\n10\.9\.2\n$/);
    // A package from a local directory (PyPI is not reachable from here): installed into the
    // system's Python as in a container (no PEP 668 refusal), and into a venv.
    await sh(
      'mkdir -p /tmp/hello/hello && echo \'greeting = "hi"\' > /tmp/hello/hello/__init__.py && printf \'from setuptools import setup\\nsetup(name="hello", version="1.0", packages=["hello"])\\n\' > /tmp/hello/setup.py',
    );
    await sh('pip install --no-index --no-build-isolation -q /tmp/hello');
    assert.equal(await sh("cd / && python3 -c 'import hello; print(hello.greeting)'"), 'hi\n');
    await sh('python3 -m venv /tmp/venv && /tmp/venv/bin/pip install --no-index --no-build-isolation -q /tmp/hello');
    assert.equal(await sh("cd / && /tmp/venv/bin/python -c 'import hello; print(hello.greeting)'"), 'hi\n');
    // npm through the egress gateway to the npm registry (the sandbox has no other way out).
    await sh('mkdir -p /tmp/app && cd /tmp/app && npm install --no-audit --no-fund --loglevel=error is-number@7.0.0', 120_000);
    assert.equal(await sh(`cd /tmp/app && node -e "console.log(require('is-number')(5))"`), 'true\n');
    const audit = (await admin.call('GET', `/v1/sessions/${id}/egress/audit`)).body;
    assert.ok(JSON.stringify(audit).includes('registry.npmjs.org'), 'the install went through the gateway');
  });

  test('set up once, start many: versions, isolation between tenants, deletion', { timeout: 180_000 }, async () => {
    const a = await newTenant('template-owner');
    const templatesBefore = existsSync(`${platform.dataDir}/btrfs/templates/custom`) ? customTemplates() : [];
    const source = await created(a, 'tiny');
    await a.exec(source, 'mkdir -p /opt/tool && echo v1 > /opt/tool/version');

    const started = performance.now();
    const v1 = await a.call('POST', '/v1/templates', { name: 'tool-env', fromSession: source });
    const tookMs = performance.now() - started;
    assert.equal(v1.status, 201, JSON.stringify(v1.body));
    assert.deepEqual([v1.body.name, v1.body.version, v1.body.builtIn], ['tool-env', 1, false]);
    process.stderr.write(`template from a session (fs checkpoint + snapshot) through the API: ${tookMs.toFixed(0)} ms\n`);

    const first = await created(a, 'tool-env');
    assert.equal((await a.exec(first, 'cat /opt/tool/version')).stdout, 'v1\n');
    const machineIds = await Promise.all([source, first].map(async (id) => (await a.exec(id, 'cat /etc/machine-id')).stdout));
    assert.notEqual(machineIds[0], machineIds[1], 'a session from a template has an identity of its own');

    // Made again: a new version for new sessions; the first session keeps its files.
    await a.exec(source, 'echo v2 > /opt/tool/version');
    const checkpoint = (await a.call('POST', `/v1/sessions/${source}/checkpoints`, { kind: 'fs' })).body;
    assert.equal((await a.call('POST', '/v1/templates', { name: 'tool-env', fromCheckpoint: checkpoint.id })).body.version, 2);
    const second = await created(a, 'tool-env');
    assert.equal((await a.exec(second, 'cat /opt/tool/version')).stdout, 'v2\n');
    assert.equal((await a.exec(first, 'cat /opt/tool/version')).stdout, 'v1\n');
    const listed = (await a.call('GET', '/v1/templates')).body.templates.map(
      (t: { name: string; version: number; sessions: number }) => `${t.name}@${t.version}:${t.sessions}`,
    );
    assert.deepEqual(listed, ['base@0:0', 'tiny@0:1', 'code-interpreter@0:0', 'desktop@0:0', 'tool-env@2:2']);

    // Another tenant sees only the built-ins and can neither start from nor delete it.
    const b = await newTenant('template-stranger');
    assert.deepEqual(
      (await b.call('GET', '/v1/templates')).body.templates.map((t: { name: string }) => t.name),
      ['base', 'tiny', 'code-interpreter', 'desktop'],
    );
    const refused = await b.call('POST', '/v1/sessions', { template: 'tool-env' });
    assert.deepEqual([refused.status, refused.body.error.code], [400, 'UNKNOWN_TEMPLATE']);
    assert.equal((await b.call('POST', '/v1/templates', { name: 'stolen', fromCheckpoint: checkpoint.id })).body.error.code, 'CHECKPOINT_NOT_FOUND');
    assert.equal((await b.call('DELETE', '/v1/templates/tool-env?force=1')).status, 404);
    assert.equal((await a.call('POST', '/v1/templates', { name: 'base', fromSession: source })).status, 400, 'built-in names are taken');

    // Deletion waits for its sessions unless forced; they keep their files and still resume.
    const inUse = await a.call('DELETE', '/v1/templates/tool-env');
    assert.deepEqual([inUse.status, inUse.body.error.code, inUse.body.error.details.sessions], [409, 'TEMPLATE_IN_USE', 2]);
    assert.equal(customTemplates().length, templatesBefore.length + 2, 'both versions are on the node');
    assert.equal((await a.call('DELETE', '/v1/templates/tool-env?force=1')).status, 200);
    assert.deepEqual(customTemplates(), templatesBefore, 'both versions are gone from the node');
    await a.call('POST', `/v1/sessions/${second}/sandbox/kill`);
    assert.equal((await a.exec(second, 'cat /opt/tool/version')).stdout, 'v2\n');
    assert.equal((await a.call('POST', '/v1/sessions', { template: 'tool-env' })).body.error.code, 'UNKNOWN_TEMPLATE');
  });
});
