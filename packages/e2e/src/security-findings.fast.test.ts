import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import { Api } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

/**
 * The findings of the security probe that need a running platform, one case each; each failed
 * before its fix. The others are tested where their code is: the browser case of a preview page
 * and the console's key in console.full, credentials kept from previews' apps in previews.full,
 * the gateway's masking, host checks and connections in gateway.full (its IPv6 rules in
 * gateway-parts), tenant templates kept off /metrics in template-pools.full, E2B's stream errors
 * in the e2b adapter's unit tests, the matchers and parsers timed in their unit tests.
 */
describe('security findings: what one tenant could do to all', () => {
  let platform: RunningPlatform;
  let admin: Api;
  let tenant: Api;

  platformForSuite([], (p, a) => ((platform = p), (admin = a)));

  const asTenant = async (): Promise<Api> => {
    if (!tenant) {
      const { id } = (await admin.call('POST', '/v1/tenants', { name: 'probe' })).body;
      tenant = new Api(platform.url, (await admin.call('POST', '/v1/keys', { tenantId: id })).body.key);
    }
    return tenant;
  };

  /** Runs `request` while /healthz is asked every 20 ms; the longest a /healthz waited, and the request's answer. */
  async function healthWhile<T>(request: () => Promise<T>): Promise<{ answer: T; elapsedMs: number; worstHealthMs: number }> {
    let done = false;
    let worst = 0;
    const poll = (async () => {
      while (!done) {
        const started = performance.now();
        await fetch(`${platform.url}/healthz`);
        worst = Math.max(worst, performance.now() - started);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const started = performance.now();
    const answer = await request().finally(() => (done = true));
    const elapsedMs = performance.now() - started;
    await poll;
    return { answer, elapsedMs, worstHealthMs: worst };
  }

  test('COPY globs and a Dockerfile of continuation lines are answered at once; /healthz never waits on them (they took 8.8 s and 17 s, blocking everyone)', {
    timeout: 120_000,
  }, async () => {
    const api = await asTenant();
    const probes = {
      glob: { name: 'dfglob', dockerfile: 'FROM no-such-template\nCOPY ***********b /x\n', files: { aaaaaaaaaaaaaaaaaaaaaaaaaa: 'eA==' } },
      'long glob': { name: 'dfglob2', dockerfile: 'FROM no-such-template\nCOPY ********b /x\n', files: { ['a'.repeat(60)]: 'eA==' } },
      continuations: { name: 'dfcont', dockerfile: `FROM no-such-template\nRUN ${'\\\n'.repeat(126 * 1024)}true\n` },
    };
    for (const [what, body] of Object.entries(probes)) {
      const { answer, elapsedMs, worstHealthMs } = await healthWhile(() => api.call('POST', '/v1/templates', body));
      // Refused (a glob naming nothing) or accepted as a build that fails later (no such template): never a 5xx.
      assert.ok(answer.status < 500, `${what}: ${answer.status} ${JSON.stringify(answer.body)}`);
      if (what !== 'continuations') assert.match(answer.body.error?.message ?? '', /COPY source \S+ is not in the build context/);
      assert.ok(elapsedMs < 2000, `${what}: answered after ${elapsedMs.toFixed(0)} ms`);
      assert.ok(worstHealthMs < 250, `${what}: /healthz waited ${worstHealthMs.toFixed(0)} ms`);
      process.stderr.write(`${what}: answered in ${elapsedMs.toFixed(0)} ms, /healthz waited at most ${worstHealthMs.toFixed(0)} ms\n`);
    }
  });

  test("an image pull never reaches the node's own network, and its error does not tell open ports from closed", { timeout: 60_000 }, async () => {
    const api = await asTenant();
    let connections = 0;
    const listener = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const open = (listener.address() as { port: number }).port;
    try {
      const answers = [];
      for (const image of [
        `docker://127.0.0.1:${open}/x/y`,
        'docker://127.0.0.1:1/x/y',
        `docker://localhost:${open}/x`,
        `docker://[::1]:${open}/x`,
        'docker://169.254.169.254/x',
      ]) {
        const reply = await api.call('POST', '/v1/templates/pulled/image', { image });
        assert.equal(reply.status, 400, `${image}: ${JSON.stringify(reply.body)}`);
        assert.match(reply.body.error.message, /pulls follow the rules of sandbox egress/);
        answers.push(reply.body.error.message.replace(/from \S+:/, 'from HOST:'));
      }
      assert.equal(new Set(answers).size, 1, `the answers differ: ${answers.join(' | ')}`);
      assert.equal(connections, 0, 'something connected to the loopback listener');
    } finally {
      listener.close();
    }
  });
});
