import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { signalAndWait } from './child-exit.js';
import { processAlive } from './process-alive.js';

test('a child that stops at the signal ends by it, not killed', async () => {
  const child = spawn('sleep', ['30']);
  const exit = await signalAndWait(child, 'SIGTERM', 10_000);
  assert.deepEqual(exit, { code: null, signal: 'SIGTERM', killed: false });
  assert.equal(processAlive(child.pid!), false);
});

test('a child that ignores the signal is SIGKILLed after its grace', async () => {
  // An ignored signal stays ignored across exec: this `sleep` ignores SIGTERM.
  const child = spawn('sh', ['-c', "trap '' TERM; echo ready; exec sleep 30"]);
  await new Promise((resolve) => child.stdout.once('data', resolve));
  const started = Date.now();
  let aliveBeforeKill = false;
  const exit = await signalAndWait(child, 'SIGTERM', 300, () => (aliveBeforeKill = processAlive(child.pid!)));
  assert.deepEqual(exit, { code: null, signal: 'SIGKILL', killed: true });
  assert.ok(Date.now() - started >= 290, 'given its grace first');
  assert.equal(aliveBeforeKill, true, 'what runs before the SIGKILL sees the child still running');
  assert.equal(processAlive(child.pid!), false);
});

test('a child that has already exited answers at once with how it ended', async () => {
  const child = spawn('sh', ['-c', 'exit 3']);
  await new Promise((resolve) => child.once('exit', resolve));
  assert.deepEqual(await signalAndWait(child, 'SIGTERM'), { code: 3, signal: null, killed: false });
});
