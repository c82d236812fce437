import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CreateTemplateRequestSchema,
  CommandSchema,
  CreateSessionRequestSchema,
  ExecRequestSchema,
  SandboxPathSchema,
  VolumeMountListSchema,
  VolumeMountPathSchema,
  VolumeNameSchema,
  errorFromBody,
  findSandboxRoute,
  matchPath,
  newId,
} from './index.js';

test('sandbox paths: ".." segments, NUL bytes and empty paths are refused', () => {
  for (const bad of ['../etc/passwd', '/tmp/../../etc', 'a/..', '', 'a\0b']) assert.equal(SandboxPathSchema.safeParse(bad).success, false, bad);
  for (const good of ['/etc/passwd', 'relative/file', './x', '/workspace/..hidden', 'a..b'])
    assert.equal(SandboxPathSchema.safeParse(good).success, true, good);
});

test('commands are a non-empty shell string or a non-empty argv', () => {
  assert.equal(CommandSchema.safeParse('echo hi').success, true);
  assert.equal(CommandSchema.safeParse(['ls', '-la']).success, true);
  for (const bad of ['', [], [42], 7, null]) assert.equal(CommandSchema.safeParse(bad).success, false, JSON.stringify(bad));
});

test('exec requests are strict and bounded', () => {
  assert.equal(ExecRequestSchema.safeParse({ cmd: 'x', colour: 1 }).success, false);
  assert.equal(ExecRequestSchema.safeParse({ cmd: 'x', timeoutMs: -1 }).success, false);
  assert.equal(ExecRequestSchema.safeParse({ cmd: 'x', env: { 'BAD-NAME': 'v' } }).success, false);
  assert.equal(ExecRequestSchema.safeParse({ cmd: 'x', env: { GOOD: 'v' }, cwd: '/tmp', stdin: 'in', timeoutMs: 5 }).success, true);
});

test('create session fills documented defaults', () => {
  const parsed = CreateSessionRequestSchema.parse({});
  assert.equal(parsed.template, 'base');
  assert.deepEqual(parsed.resources, { memoryMb: 1024, cpus: 1, pids: 1024 });
  assert.equal(CreateSessionRequestSchema.safeParse({ template: 'Bad Name' }).success, false);
});

test("template names like Object's own properties are plain names: never an alias, never a built-in", () => {
  assert.equal(CreateSessionRequestSchema.parse({ template: 'code-interpreter-v1' }).template, 'code-interpreter');
  assert.equal(CreateSessionRequestSchema.parse({ template: 'constructor' }).template, 'constructor');
  assert.equal(CreateTemplateRequestSchema.safeParse({ name: 'constructor', fromCheckpoint: 'chk_abc' }).success, true);
  assert.equal(CreateTemplateRequestSchema.safeParse({ name: 'code-interpreter-v1', fromCheckpoint: 'chk_abc' }).success, false);
});

test('wire errors rebuild into typed errors; garbage becomes the fallback', () => {
  const known = errorFromBody({ error: { code: 'FILE_NOT_FOUND', message: 'gone' } }, 'INTERNAL', 'x');
  assert.deepEqual([known.code, known.status, known.message], ['FILE_NOT_FOUND', 404, 'gone']);
  const unknown = errorFromBody({ error: { code: 'MADE_UP', message: 'x' } }, 'DAEMON_PROTOCOL_ERROR', 'bad reply');
  assert.deepEqual([unknown.code, unknown.message], ['DAEMON_PROTOCOL_ERROR', 'bad reply']);
  assert.equal(errorFromBody('nonsense', 'INTERNAL', 'x').code, 'INTERNAL');
  assert.equal(errorFromBody({ error: { code: 'INTERNAL', message: 'y'.repeat(10_000) } }, 'INTERNAL', 'x').message.length, 2000);
});

test('route matching: params are restricted, methods distinguished', () => {
  assert.deepEqual(matchPath('/processes/:pid/signal', '/processes/42/signal'), { pid: '42' });
  assert.equal(matchPath('/processes/:pid/signal', '/processes/../signal'), null);
  assert.equal(matchPath('/processes/:pid/signal', '/processes/4/2/signal'), null);
  assert.deepEqual(matchPath('/s/:id/ports/:port/*', '/s/ses_a/ports/80/a/b.css'), { id: 'ses_a', port: '80', '*': 'a/b.css' });
  assert.deepEqual(matchPath('/s/:id/ports/:port/*', '/s/ses_a/ports/80/'), { id: 'ses_a', port: '80', '*': '' });
  assert.deepEqual(matchPath('/s/:id/ports/:port/*', '/s/ses_a/ports/80'), { id: 'ses_a', port: '80', '*': '' });
  assert.equal(matchPath('/s/:id/ports/:port/*', '/s/ses_a/ports'), null);
  const found = findSandboxRoute('GET', '/files/list');
  assert.ok(found && 'route' in found && found.route.kind === 'json');
  assert.deepEqual(findSandboxRoute('PATCH', '/files'), { methodMismatch: true });
  assert.equal(findSandboxRoute('GET', '/nothing'), null);
});

test('ids are prefixed, lowercase and unique', () => {
  const ids = new Set(Array.from({ length: 1000 }, () => newId('ses')));
  assert.equal(ids.size, 1000);
  for (const id of ids) assert.match(id, /^ses_[a-z0-9]{12}$/);
});

test('commands spawn cannot run are refused at the boundary: an empty program, NUL bytes', () => {
  for (const cmd of [[''], '\u0000', 'echo \u0000', ['echo', 'a\u0000b'], [], '']) {
    assert.equal(ExecRequestSchema.safeParse({ cmd }).success, false, JSON.stringify(cmd));
  }
  for (const cmd of [['true'], 'true', ['echo', '']]) assert.equal(ExecRequestSchema.safeParse({ cmd }).success, true, JSON.stringify(cmd));
});

test('volume names and mount paths cannot point anywhere but where they say', () => {
  for (const name of ['data', 'a-1', 'x'.repeat(63)]) assert.ok(VolumeNameSchema.safeParse(name).success, name);
  for (const name of ['', '../x', 'a/b', 'Data', '-a', '1a', 'x'.repeat(64), 'a b']) assert.ok(!VolumeNameSchema.safeParse(name).success, name);
  for (const path of ['/data', '/mnt/data', '/home/user/.cache', '/workspace/v1.2']) assert.ok(VolumeMountPathSchema.safeParse(path).success, path);
  const refused = [
    '/',
    'data',
    '/data/',
    '/a//b',
    '/a/../b',
    '/a/./b',
    '/proc',
    '/proc/x',
    '/dev/shm',
    '/tmp',
    '/.space',
    '/run',
    '/run/space/x',
    '/sys',
    '/a b',
    '/a\0b',
  ];
  for (const path of refused) assert.ok(!VolumeMountPathSchema.safeParse(path).success, path);
  const mounts = (...paths: string[]) => VolumeMountListSchema.safeParse(paths.map((path, i) => ({ name: `v${i}`, path }))).success;
  assert.ok(mounts('/a', '/b', '/ab'));
  assert.ok(!mounts('/a', '/a'), 'the same path twice');
  assert.ok(!mounts('/a', '/a/b'), 'one inside another');
  assert.ok(
    !VolumeMountListSchema.safeParse([
      { name: 'v', path: '/a' },
      { name: 'v', path: '/b', readOnly: true },
    ]).success,
    'one volume twice',
  );
  assert.deepEqual(CreateSessionRequestSchema.parse({ volumes: [{ name: 'v', path: '/a' }] }).volumes, [{ name: 'v', path: '/a', readOnly: false }]);
});
