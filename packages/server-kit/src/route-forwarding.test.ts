import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Limits, type SandboxRoute, sandboxRoutes } from '@space/protocol';
import { type HttpSandboxRoute, daemonAnswerBoundMs } from './route-forwarding.js';

const route = (method: string, path: string) => sandboxRoutes.find((r: SandboxRoute) => r.method === method && r.path === path) as HttpSandboxRoute;

test("a JSON call to a sandbox's agent is bounded (an exec by its own timeout) unless its work grows with its input; streams, uploads and downloads last as long as their content", () => {
  const exec = route('POST', '/exec');
  assert.equal(daemonAnswerBoundMs(exec, { cmd: ['true'] }), Limits.defaultExecTimeoutMs + 15_000);
  assert.equal(daemonAnswerBoundMs(exec, { cmd: ['true'], timeoutMs: 1000 }), 16_000);
  assert.equal(daemonAnswerBoundMs(exec, { cmd: ['sleep', '9'], background: true }), 15_000);
  for (const [method, path] of [
    ['GET', '/processes'],
    ['GET', '/files/stat'],
    ['GET', '/files/list'],
    ['GET', '/code/contexts'],
  ] as const)
    assert.equal(daemonAnswerBoundMs(route(method, path), {}), 60_000, `${method} ${path}`);
  // Work that grows with what it is given: a tree removed or moved, a kernel started.
  for (const [method, path] of [
    ['GET', '/files'],
    ['PUT', '/files'],
    ['POST', '/code/run'],
    ['DELETE', '/files'],
    ['POST', '/files/move'],
    ['POST', '/code/contexts'],
  ] as const)
    assert.equal(daemonAnswerBoundMs(route(method, path), {}), undefined, `${method} ${path}`);
});
