import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, test } from 'node:test';
import { type LocalPostgres, startLocalPostgres } from '@space/control-plane';
import { Space } from '@space/sdk';
import { freePort } from '@space/server-kit';
import { Api } from './client.js';
import { type RunningPlatform, startPlatform } from './platform.js';

// Two control planes on one PostgreSQL and one node agent: `space up` (control plane and node) and a
// second `space control-plane` using the same node. Either serves any session.
let postgres: LocalPostgres;
let first: RunningPlatform;
let second: RunningPlatform | null = null;
let a: Api;
let b: Api;
const sessions: string[] = [];

/** The call's answer, or a failure if it takes longer than `ms`: a database outage must not hang calls. */
function within<T>(ms: number, call: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    call.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} hung for ${ms} ms`)), ms);
    }),
  ]);
}

before(async () => {
  postgres = await startLocalPostgres();
  const databaseUrl = await postgres.url('space');
  const nodePort = await freePort();
  const nodeToken = `pg-test-${process.pid}-${Date.now()}`;
  first = await startPlatform({ env: { SPACE_DATABASE_URL: databaseUrl, SPACE_NODE_PORT: String(nodePort), SPACE_NODE_TOKEN: nodeToken } });
  second = await startPlatform({
    command: 'control-plane',
    adminKey: first.adminKey,
    readyPattern: /control plane on (http:\/\/\S+),/,
    env: { SPACE_DATABASE_URL: databaseUrl, SPACE_NODE_URL: `http://127.0.0.1:${nodePort}`, SPACE_NODE_TOKEN: nodeToken },
  });
  a = new Api(first.url, first.adminKey);
  b = new Api(second.url, second.adminKey);
});

after(async () => {
  for (const id of sessions) await a?.call('DELETE', `/v1/sessions/${id}`);
  second?.process.kill('SIGKILL');
  const code = await first?.stop();
  await postgres?.stop();
  assert.equal(code, 0, first?.output());
});

test('a session made through one control plane is served, checkpointed, forked and resumed through the other', async () => {
  const session = await a.createSession({ template: 'tiny' });
  sessions.push(session.id);
  assert.equal((await b.call('GET', `/v1/sessions/${session.id}`)).body.id, session.id);
  await b.exec(session.id, ['sh', '-c', 'echo from-b > /tmp/f']);
  assert.equal((await a.exec(session.id, ['cat', '/tmp/f'])).stdout, 'from-b\n');
  const checkpoint = await b.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' });
  assert.equal(checkpoint.status, 201, JSON.stringify(checkpoint.body));
  const fork = await a.call('POST', `/v1/checkpoints/${checkpoint.body.id}/fork`, { count: 1 });
  assert.equal(fork.status, 201, JSON.stringify(fork.body));
  const forkId = fork.body.sessions[0].id as string;
  sessions.push(forkId);
  assert.equal((await b.exec(forkId, ['cat', '/tmp/f'])).stdout, 'from-b\n');
  assert.equal((await a.call('POST', `/v1/sessions/${session.id}/sandbox/kill`)).status, 200);
  assert.equal((await b.exec(session.id, ['cat', '/tmp/f'])).stdout, 'from-b\n', 'resumed through the other control plane');
  const history = (await a.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory as { endReason: string | null }[];
  assert.deepEqual(
    history.map((h) => h.endReason),
    ['killed', null],
  );
});

test('PostgreSQL restarted under load: calls fail cleanly (503 STORE_UNAVAILABLE) during the outage, work after it, and no acknowledged write is lost', async () => {
  const session = await a.createSession({ template: 'tiny' });
  sessions.push(session.id);
  const statuses = new Map<string, number>();
  const acknowledged: number[] = [];
  let next = 0;
  let running = true;
  const worker = async (api: Api) => {
    while (running) {
      const n = next++;
      const reply = await within(20_000, api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: ['sh', '-c', `echo ${n} >> /tmp/log`] }), `exec ${n}`);
      const key = reply.status === 200 ? '200' : `${reply.status} ${reply.body?.error?.code}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
      if (reply.status === 200) acknowledged.push(n);
      else await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const workers = [worker(a), worker(b), worker(a), worker(b)];
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await postgres.restart(2000);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  running = false;
  await Promise.all(workers);
  const seen = Object.fromEntries(statuses);
  assert.deepEqual(
    Object.keys(seen)
      .filter((k) => k !== '200' && k !== '503 STORE_UNAVAILABLE')
      .map((k) => `${k}: ${seen[k]}`),
    [],
    `only successes and STORE_UNAVAILABLE: ${JSON.stringify(seen)}`,
  );
  assert.ok((seen['503 STORE_UNAVAILABLE'] ?? 0) > 0, `the outage was seen: ${JSON.stringify(seen)}`);
  const log = (await a.exec(session.id, ['cat', '/tmp/log'])).stdout as string;
  const written = new Set(log.split('\n').filter(Boolean).map(Number));
  assert.deepEqual(
    acknowledged.filter((n) => !written.has(n)),
    [],
    'every acknowledged append is in the file',
  );
  // Both control planes work again, including lifecycle operations (leases in the database).
  assert.equal((await b.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' })).status, 201);
  assert.equal((await a.call('GET', '/v1/sessions')).status, 200);
});

test('a control plane SIGKILLed: the other carries on with every session, and the SDK given both URLs moves to it', async () => {
  const space = new Space({ apiUrl: [second!.url, first.url], apiKey: first.adminKey });
  assert.equal((await space.sessions.handle(sessions[0]!).exec(['echo', 'via the first URL'])).stdout, 'via the first URL\n');
  // Once it is gone: a call in flight as it dies may have run, so the SDK rightly does not send it again.
  const exited = once(second!.process, 'exit');
  second!.process.kill('SIGKILL');
  await exited;
  second = null;
  for (const id of sessions) {
    assert.equal((await a.exec(id, ['true'])).exitCode, 0, id);
    assert.equal((await space.sessions.handle(id).exec(['echo', 'carried on'])).stdout, 'carried on\n', id);
  }
  assert.equal((await space.sessions.list()).length >= sessions.length, true);
});
