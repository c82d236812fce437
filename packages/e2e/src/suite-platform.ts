import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { Api } from './client.js';
import { startPlatform, type RunningPlatform } from './platform.js';

/**
 * One platform for a test suite: started before its tests (`onStart` receives it and an admin API
 * client), and after them every session listed in `sessions` is deleted and the platform must stop
 * cleanly.
 */
export function platformForSuite(
  sessions: string[],
  onStart: (platform: RunningPlatform, api: Api) => void,
  options: Parameters<typeof startPlatform>[0] = {},
): void {
  let platform: RunningPlatform | null = null;
  let api: Api | null = null;
  before(async () => {
    platform = await startPlatform(options);
    api = new Api(platform.url, platform.adminKey);
    onStart(platform, api);
  });
  after(async () => {
    if (!platform || !api) return;
    for (const id of sessions) await api.call('DELETE', `/v1/sessions/${id}`);
    assert.equal(await platform.stop(), 0, platform.output());
  });
}
