import assert from 'node:assert/strict';
import { request } from 'node:http';
import { type Socket, connect } from 'node:net';
import { describe, test } from 'node:test';
import type { Api } from './client.js';
import type { RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';
import { TestUpstream } from './test-upstream.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * A dev server as agents run them, in Node: it counts in memory what it served and what its client
 * polling through the gateway (on a keep-alive connection, every 200 ms) got, and echoes upgraded
 * connections.
 */
const nodeServer = `
const http = require('http');
let served = 0, polls = 0, pollErrors = 0;
const server = http.createServer((req, res) => { served++; res.end(JSON.stringify({ url: req.url, served, polls, pollErrors })); });
server.on('upgrade', (req, socket) => {
  socket.on('error', () => {});
  socket.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: echo\\r\\nConnection: Upgrade\\r\\n\\r\\n');
  socket.pipe(socket);
});
server.listen(3000);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const poll = () => http.get({ host: 'plain.test.space', path: '/bytes?n=10', agent }, (r) => {
  r.resume();
  r.on('end', () => { polls++; setTimeout(poll, 200); });
}).on('error', () => { pollErrors++; setTimeout(poll, 200); });
poll();
`;

interface NodeServerState {
  url: string;
  served: number;
  polls: number;
  pollErrors: number;
}

describe('dev servers across full checkpoints, kills and forks', () => {
  const upstream = new TestUpstream(['plain.test.space']);
  let platform: RunningPlatform;
  let api: Api;
  const sessions: string[] = [];

  const preview = async (id: string, port: number, path: string): Promise<{ status: number; body: string }> => {
    const res = await fetch(`${platform.url}/v1/sessions/${id}/ports/${port}${path}`, { headers: { authorization: `Bearer ${api.key}` } });
    return { status: res.status, body: await res.text() };
  };
  const nodeState = async (id: string, path = '/'): Promise<NodeServerState> => {
    const reply = await preview(id, 3000, path);
    if (reply.status !== 200) {
      // Most often the server is gone because a restore failed: the sandbox's history says why.
      const sandbox = (await api.call('GET', `/v1/sessions/${id}`)).body.sandboxHistory?.at(-1);
      assert.fail(`${reply.status} ${reply.body}; the sandbox: ${JSON.stringify(sandbox)}`);
    }
    return JSON.parse(reply.body);
  };
  /** A raw upgraded connection to the Node server through the preview URL, echoing. */
  const upgraded = (id: string): Promise<Socket> =>
    new Promise((resolve, reject) => {
      const req = request(`${platform.url}/v1/sessions/${id}/ports/3000/echo`, {
        headers: { authorization: `Bearer ${api.key}`, connection: 'Upgrade', upgrade: 'echo' },
      });
      req.on('upgrade', (_res, socket) => resolve(socket));
      req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
      req.on('error', reject);
      req.end();
    });
  /** A new session (no automatic checkpoints, no idle stop) running both servers; the Node one answered once. */
  const serving = async (): Promise<any> => {
    const session = await api.createSession({ template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    const { id } = session;
    sessions.push(id);
    await api.exec(id, ['sh', '-c', 'mkdir -p /workspace/site && echo python-served > /workspace/site/index.html']);
    await api.exec(id, ['python3', '-m', 'http.server', '8000', '--directory', '/workspace/site'], { background: true });
    await api.exec(id, ['node', '-e', nodeServer], { background: true });
    // The first request waits for the server to listen.
    const first = await fetch(`${platform.url}/v1/sessions/${id}/ports/3000/`, {
      headers: { authorization: `Bearer ${api.key}`, 'x-space-listen-wait-ms': '10000' },
    });
    assert.equal(first.status, 200);
    return session;
  };
  const fullCheckpoint = async (id: string): Promise<any> => {
    const reply = await api.call('POST', `/v1/sessions/${id}/checkpoints`, { kind: 'full' });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    assert.equal(reply.body.kind, 'full');
    return reply.body;
  };
  const kill = async (id: string): Promise<void> => {
    assert.equal((await api.call('POST', `/v1/sessions/${id}/sandbox/kill`)).status, 200);
  };
  /**
   * Polls through the gateway go on: the count grows by a few within 10 s (a name lookup in flight
   * at the save lost its answer: the resolver asks again after 2 s).
   */
  const pollsGoOn = async (id: string): Promise<void> => {
    const from = (await nodeState(id)).polls;
    const deadline = Date.now() + 10_000;
    let now = from;
    while (now < from + 3 && Date.now() < deadline) {
      await sleep(300);
      now = (await nodeState(id)).polls;
    }
    assert.ok(now >= from + 3, `the client polling through the gateway goes on (${from} then ${now})`);
  };

  platformForSuite(sessions, (p, a) => ((platform = p), (api = a)), { upstream });

  test('Python and Node servers, with connections open through the preview and the gateway, are saved; they serve after kills and in a fork', {
    timeout: 300_000,
  }, async () => {
    const session = await serving();
    // Answered through the preview URL: the node keeps that connection to the Node server alive,
    // and Python's server closes its own first (TIME_WAIT in the sandbox).
    assert.deepEqual(await preview(session.id, 8000, '/index.html'), { status: 200, body: 'python-served\n' });
    await pollsGoOn(session.id);
    const echo = await upgraded(session.id);
    const echoed = new Promise<string>((resolve) => echo.once('data', (d: Buffer) => resolve(d.toString())));
    echo.write('ping');
    assert.equal(await echoed, 'ping');
    const echoClosed = new Promise<void>((resolve) => echo.once('close', () => resolve()));
    echo.on('error', () => undefined);

    const checkpoint = await fullCheckpoint(session.id);
    await echoClosed; // cut before the save: the sandbox keeps no connection with the outside
    const atCheckpoint = await nodeState(session.id);
    await pollsGoOn(session.id);

    await kill(session.id);
    const restored = await nodeState(session.id, '/after-kill');
    assert.ok(restored.served > 1 && restored.served <= atCheckpoint.served + 1, `the Node server's memory is the checkpoint's: ${JSON.stringify(restored)}`);
    assert.deepEqual(await preview(session.id, 8000, '/index.html'), { status: 200, body: 'python-served\n' });
    await pollsGoOn(session.id);
    const history = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory;
    assert.equal(history.at(-1).restoredFrom, checkpoint.id);

    // Files written after the restore: the next resume goes back to the checkpoint again (its files
    // kept aside), and so does the one after it, never booting on the kept copy without processes.
    for (const round of [1, 2]) {
      await api.exec(session.id, `echo ${round} > /workspace/after-restore`);
      await kill(session.id);
      assert.equal((await nodeState(session.id, `/round-${round}`)).url, `/round-${round}`);
      assert.deepEqual(await preview(session.id, 8000, '/index.html'), { status: 200, body: 'python-served\n' });
      const last = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory.at(-1);
      assert.equal(last.restoredFrom, checkpoint.id, `round ${round}: ${JSON.stringify(last)}`);
      assert.match(last.note ?? '', /went back to .* kept in ckp_/);
    }

    const fork = await api.call('POST', `/v1/checkpoints/${checkpoint.id}/fork`, { count: 1 });
    assert.equal(fork.status, 201, JSON.stringify(fork.body));
    const forked = fork.body.sessions[0].id;
    sessions.push(forked);
    assert.equal((await nodeState(forked, '/in-fork')).url, '/in-fork');
    assert.deepEqual(await preview(forked, 8000, '/index.html'), { status: 200, body: 'python-served\n' });
    await pollsGoOn(forked);
  });

  test('a connection the node did not open (from the host straight to the sandbox) refuses the full checkpoint, naming it; an fs one is taken and nothing stops', {
    timeout: 120_000,
  }, async () => {
    const session = await serving();
    // The sandbox's address: its default gateway's plus one (each sandbox has a /30 of its own).
    const route: string = (await api.exec(session.id, ['cat', '/proc/net/route'])).stdout;
    const gatewayHex = route
      .split('\n')
      .find((l: string) => l.split(/\s+/)[1] === '00000000')!
      .split(/\s+/)[2]!;
    const octets = gatewayHex
      .match(/../g)!
      .map((h: string) => Number.parseInt(h, 16))
      .reverse();
    octets[3]! += 1;
    // Upgraded, so the server has accepted it and keeps it open: one still in its listener's
    // queue is not a socket of the sandbox yet (gVisor lists none such in /proc/net/tcp).
    const stray = connect({ host: octets.join('.'), port: 3000 });
    stray.on('error', () => undefined);
    stray.write('GET /stray HTTP/1.1\r\nHost: stray\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n');
    const switched = await new Promise<string>((resolve) => stray.once('data', (chunk) => resolve(chunk.toString())));
    assert.match(switched, /^HTTP\/1\.1 101 /);
    try {
      const reply = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
      assert.equal(reply.status, 409, JSON.stringify(reply.body));
      assert.equal(reply.body.error.code, 'FULL_CHECKPOINT_REFUSED');
      // Every open one is named (the sandbox's own server may have one of its own under way too).
      assert.match(reply.body.error.message, new RegExp(`connections with the outside of the sandbox are open \\([^)]*${octets.join('\\.')}:3000 -> `));
      const list = (await api.call('GET', `/v1/sessions/${session.id}/checkpoints`)).body.checkpoints;
      assert.deepEqual(
        list.map((c: any) => [c.id, c.kind]),
        [[reply.body.error.details.fallbackCheckpointId, 'fs']],
      );
      assert.equal((await api.call('GET', `/v1/sessions/${session.id}`)).body.sandbox.id, session.sandbox.id, 'the sandbox was not touched');
      assert.equal((await nodeState(session.id, '/still')).url, '/still');
    } finally {
      stray.destroy();
    }
    await sleep(300);
    await fullCheckpoint(session.id);
  });
});
