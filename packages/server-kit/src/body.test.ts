import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { Router } from './router.js';
import { lineLog } from './server-log.js';
import { listen, closeServer } from './listen.js';
import { readJson } from './body.js';
import { sendJson } from './respond.js';

test('JSON bodies: malformed, oversize, invalid and unknown routes get stable codes', async () => {
  const router = new Router({ log: lineLog(() => undefined), service: 'test' }).on('POST', '/echo', async ({ req, res }) =>
    sendJson(res, 200, await readJson(req, z.object({ n: z.number() }).strict(), 1024)),
  );
  const { server, port } = await listen(router, '127.0.0.1', 0);
  const post = async (body: string) => {
    const res = await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', body });
    return { status: res.status, body: (await res.json()) as { n?: number; error?: { code: string } } };
  };
  assert.deepEqual(await post('{"n":1}'), { status: 200, body: { n: 1 } });
  assert.equal((await post('{"n":')).body.error?.code, 'INVALID_JSON');
  assert.equal((await post('{"n":"1"}')).body.error?.code, 'VALIDATION_FAILED');
  assert.equal((await post(JSON.stringify({ n: 1, pad: 'x'.repeat(2000) }))).status, 413);
  const missing = await fetch(`http://127.0.0.1:${port}/nowhere`);
  assert.equal(missing.status, 404);
  const wrongMethod = await fetch(`http://127.0.0.1:${port}/echo`);
  assert.equal(wrongMethod.status, 405);
  await closeServer(server);
});
