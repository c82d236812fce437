import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { Api } from './client.js';
import { startPlatform, type RunningPlatform } from './platform.js';
import type { TestUpstream } from './test-upstream.js';

/**
 * One platform for a test suite: started before its tests (`onStart` receives it and an admin API
 * client), and after them every session listed in `sessions` is deleted and the platform must stop
 * cleanly. With `upstream`, that test server is started first and the platform sends the gateway's
 * test hosts to it; it is stopped last. `lateEnv`: settings known only once the suite's own servers
 * (registered before) have started, such as their ports.
 */
export function platformForSuite(
  sessions: string[],
  onStart: (platform: RunningPlatform, api: Api) => void,
  options: Parameters<typeof startPlatform>[0] & { upstream?: TestUpstream; lateEnv?: () => Record<string, string> } = {},
): void {
  const { upstream, lateEnv, ...platformOptions } = options;
  let platform: RunningPlatform | null = null;
  let api: Api | null = null;
  before(async () => {
    await upstream?.start();
    platform = await startPlatform({ ...platformOptions, env: { ...platformOptions.env, ...upstream?.platformEnv(), ...lateEnv?.() } });
    api = new Api(platform.url, platform.adminKey);
    onStart(platform, api);
  });
  after(async () => {
    if (platform && api) {
      for (const id of sessions) await api.call('DELETE', `/v1/sessions/${id}`);
      assert.equal(await platform.stop(), 0, platform.output());
    }
    await upstream?.stop();
  });
}
