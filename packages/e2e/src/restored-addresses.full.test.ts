import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Api } from './client.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The sandboxes' resolver (the node's DNS responder, reached through the sandbox's default route). */
const resolver = '198.18.0.1';

/** A DNS query for an A record, in Python, for the scripts below. */
const dnsQuery = String.raw`b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01x\x04test\x00\x00\x01\x00\x01'`;

/**
 * A process with a UDP socket connected to the resolver, as a resolver's lookup in flight or a
 * metrics client keeps one: bound to the sandbox's address at the time. It writes its pid and that
 * address, then sleeps.
 */
const holder = `
import os, socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(('${resolver}', 53))
with open('/workspace/holder.new', 'w') as f: f.write(f'{os.getpid()} {s.getsockname()[0]}')
os.rename('/workspace/holder.new', '/workspace/holder')
while True: time.sleep(1)
`;

/** Listens on UDP 5353 after asking the resolver once from that port itself; counts what arrives in /workspace/heard. */
const listener = `
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('0.0.0.0', 5353))
s.sendto(${dnsQuery}, ('${resolver}', 53))
heard = 0
while True:
    s.recvfrom(2048)
    heard += 1
    open('/workspace/heard', 'w').write(str(heard))
`;

/** Sends five queries from port 5353 of the given address (one the sandbox holds but is not its own): answers would go to that address. */
const spoofer = (address: string): string => `
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('${address}', 5353))
for _ in range(5): s.sendto(${dnsQuery}, ('${resolver}', 53))
`;

/** A query from the sandbox's own address is answered. */
const askOwn = `
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.sendto(${dnsQuery}, ('${resolver}', 53))
print(len(s.recvfrom(2048)[0]) > 12)
`;

describe("a restored sandbox's sockets keep the addresses they were bound to", () => {
  let api: Api;
  const sessions: string[] = [];

  platformForSuite(sessions, (_p, a) => (api = a));

  const fullCheckpoint = async (sessionId: string): Promise<any> => {
    const reply = await api.call('POST', `/v1/sessions/${sessionId}/checkpoints`, { kind: 'full' });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    return reply.body;
  };
  /** One fork of the checkpoint, which must have restored its processes. */
  const forkOf = async (checkpoint: any): Promise<any> => {
    const reply = await api.call('POST', `/v1/checkpoints/${checkpoint.id}/fork`, { count: 1 });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    const fork = reply.body.sessions[0];
    sessions.push(fork.id);
    const restored = fork.sandboxHistory[0];
    assert.equal(restored.note ?? null, null, `the fork restored its memory: ${restored.note}`);
    assert.equal(restored.restoredFrom, checkpoint.id);
    return fork;
  };
  const holderIn = async (sessionId: string): Promise<{ pid: number; address: string }> => {
    const [pid, address] = (await api.exec(sessionId, 'cat /workspace/holder')).stdout.split(' ');
    return { pid: Number(pid), address: address! };
  };
  const alive = async (sessionId: string, pid: number): Promise<boolean> => (await api.exec(sessionId, `kill -0 ${pid}`)).exitCode === 0;
  const python = (sessionId: string, script: string, background = false) => api.exec(sessionId, ['python3', '-c', script], { background });

  test('a UDP socket connected at the save survives a fork (another address) and a fork of that fork; nothing leaves from an inherited address', {
    timeout: 240_000,
  }, async () => {
    // Restoring such a socket onto a link without its address panicked runsc ("FindRoute ... no
    // route to host"): the sandbox booted on the checkpoint's files and its processes were lost.
    const parent = await api.createSession({ template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    sessions.push(parent.id);
    await python(parent.id, holder, true);
    while ((await api.exec(parent.id, 'test -s /workspace/holder')).exitCode !== 0) await sleep(100);
    const held = await holderIn(parent.id);

    // The parent runs on, so its fork has another address.
    const fork = await forkOf(await fullCheckpoint(parent.id));
    assert.deepEqual(await holderIn(fork.id), held);
    assert.ok(await alive(fork.id, held.pid), "the fork's copy of the process holding the socket runs on");
    assert.equal((await python(fork.id, askOwn)).stdout, 'True\n', 'the fork asks the resolver from its own address');

    // The fork holds the parent's address, but the host takes nothing from it: the resolver's
    // answers would reach the parent, which listens on the port the fork sends from.
    await python(parent.id, listener, true);
    const heard = async (): Promise<number> => Number((await api.exec(parent.id, 'cat /workspace/heard 2>/dev/null || echo 0')).stdout);
    for (const deadline = Date.now() + 5000; (await heard()) < 1 && Date.now() < deadline; ) await sleep(100);
    assert.equal(await heard(), 1, "the parent's own query is answered on that port");
    const spoofed = await python(fork.id, spoofer(held.address));
    assert.equal(spoofed.exitCode, 0, spoofed.stderr);
    await sleep(1500);
    assert.equal(await heard(), 1, "queries the fork sent from the parent's address never reached the resolver");

    // A fork of the fork: its image carries the parent's address along with the fork's own.
    const grandchild = await forkOf(await fullCheckpoint(fork.id));
    assert.ok(await alive(grandchild.id, held.pid), 'the process holding the socket runs on in a fork of the fork');
  });
});
