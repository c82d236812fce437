import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Api } from './client.js';
import { startPlatform, type RunningPlatform } from './platform.js';

function sandboxIp(dataDir: string, sandboxId: string): string {
  return (JSON.parse(readFileSync(`${dataDir}/node/sandboxes/${sandboxId}/record.json`, 'utf8')) as { sandboxIp: string }).sandboxIp;
}

/** The host end of a sandbox's /30 link: the sandbox address minus one. */
function hostEnd(ip: string): string {
  const parts = ip.split('.').map(Number);
  return [...parts.slice(0, 3), parts[3]! - 1].join('.');
}

describe('sandbox network: the egress gateway is the only way out', () => {
  let platform: RunningPlatform;
  let api: Api;
  let hostService: Server;
  let hostPort: number;
  const sessions: string[] = [];

  before(async () => {
    platform = await startPlatform();
    api = new Api(platform.url, platform.adminKey);
    // A host service listening on every address, as careless services do.
    hostService = createServer((_req, res) => res.end('host secret'));
    await new Promise<void>((resolve) => hostService.listen(0, '0.0.0.0', resolve));
    hostPort = (hostService.address() as AddressInfo).port;
  });

  after(async () => {
    for (const id of sessions) await api.call('DELETE', `/v1/sessions/${id}`);
    hostService.close();
    assert.equal(await platform.stop(), 0, platform.output());
  });

  test('a sandbox reaches neither host services, nor the API, nor another sandbox', { timeout: 120_000 }, async () => {
    const [a, b] = [await api.createSession({ template: 'base' }), await api.createSession({ template: 'base' })];
    sessions.push(a.id, b.id);
    const host = hostEnd(sandboxIp(platform.dataDir, a.sandbox.id));
    // Control: the service does answer on that address from the host itself, so a refusal below means the sandbox is cut off.
    assert.equal(await (await fetch(`http://${host}:${hostPort}/`)).text(), 'host secret');

    const apiPort = new URL(platform.url).port;
    const targets = [
      `http://${host}:${hostPort}/`,
      `http://${host}:${apiPort}/healthz`,
      `http://127.0.0.1:${apiPort}/healthz`,
      `http://${sandboxIp(platform.dataDir, b.sandbox.id)}:49983/health`,
      'http://1.1.1.1:8080/',
    ];
    for (const target of targets) {
      const probe = await api.exec(a.id, ['curl', '-sS', '-m', '3', target]);
      assert.notEqual(probe.exitCode, 0, `${target} answered from inside the sandbox: ${probe.stdout}`);
      assert.ok(!probe.stdout.includes('host secret'));
    }
    // Port 80 leads to the gateway, which refuses the host's own addresses whatever the Host header says.
    for (const host of [`${hostEnd(sandboxIp(platform.dataDir, a.sandbox.id))}:${hostPort}`, 'localhost', `127.0.0.1:${apiPort}`]) {
      const probe = await api.exec(a.id, ['curl', '-sS', '-m', '5', '-H', `Host: ${host}`, `http://${hostEnd(sandboxIp(platform.dataDir, a.sandbox.id))}/`]);
      assert.match(probe.stdout, /^SPACE gateway: egress to .* denied/, `${host}: ${probe.stdout}${probe.stderr}`);
    }
  });
});
