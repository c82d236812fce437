import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { repoRoot, startPlatform, type RunningPlatform } from './platform.js';

/** The examples in examples/ run as a user would run them, against a real platform. */
describe('examples', () => {
  let platform: RunningPlatform;

  before(async () => {
    platform = await startPlatform();
  });

  after(async () => {
    assert.equal(await platform.stop(), 0, platform.output());
  });

  const run = (name: string): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile(
        process.execPath,
        [path.join(repoRoot, 'examples', name)],
        { env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: platform.adminKey } },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  test('ab-fork.mjs keeps the winning strategy', { timeout: 180_000 }, async () => {
    const { code, stdout, stderr } = await run('ab-fork.mjs');
    assert.equal(code, 0, stderr);
    assert.match(stdout, /kept the winner: strategy B: patch/);
  });

  test('resilient-agent.mjs loses no step across sandbox deaths', { timeout: 180_000 }, async () => {
    const { code, stdout, stderr } = await run('resilient-agent.mjs');
    assert.equal(code, 0, stderr);
    assert.match(stdout, /done: 6 steps across 3 sandboxes/);
  });
});
