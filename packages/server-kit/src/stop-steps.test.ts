import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StopSteps } from './stop-steps.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('a slow stop step is named while it is waited for; a quick one says nothing', async () => {
  const warnings: string[] = [];
  const steps = new StopSteps((m) => warnings.push(m), 40);
  assert.equal(await steps.step('a quick step', () => 'done'), 'done');
  await steps.step('the maintenance pass under way', () => sleep(150));
  await sleep(100);
  assert.ok(warnings.length >= 2 && warnings.length <= 4, `${warnings.length} warnings: ${warnings.join('; ')}`);
  for (const warning of warnings) assert.match(warning, /^stopping: still waiting for the maintenance pass under way after \d+ s$/);
});

test('a failed stop step throws its error and stops warning', async () => {
  const warnings: string[] = [];
  const steps = new StopSteps((m) => warnings.push(m), 30);
  await assert.rejects(
    steps.step('a broken step', async () => {
      await sleep(50);
      throw new Error('unmount: busy');
    }),
    /unmount: busy/,
  );
  const after = warnings.length;
  await sleep(100);
  assert.equal(warnings.length, after);
});
