import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { serviceCommand } from '../sandbox/session-services.js';
import { listeningPorts } from './port-proxy.js';

test("listening ports from /proc/net/tcp and tcp6: LISTEN rows only, the agent's port left out, each port once", () => {
  const tcp = [
    '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
    '   0: 00000000:C33F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0        1 1 0 0 0 0 0 -1',
    '   1: 8EECD50A:C33F 8DECD50A:9C1A 01 00000000:00000000 00:00000000 00000000     0        0        2 1 0 0 0 0 0 -1',
    '   5: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0        6 2 0 0 0 0 0 -1',
    '  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
    '   2: 00000000000000000000000000000000:1F40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0        3 1 0 0 0 0 0 -1',
    '   3: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0        3 1 0 0 0 0 0 -1',
  ].join('\n');
  assert.deepEqual(listeningPorts(tcp), [
    { port: 3000, address: '::' },
    { port: 8000, address: '127.0.0.1' },
  ]);
  assert.deepEqual(listeningPorts(''), []);
});

test('a service runs under a supervisor that starts it again, with a growing pause, and names it', () => {
  const argv = serviceCommand({ name: 'web', cmd: ['sh', '-c', 'echo run >> "$0.log"; exit 3', '/tmp/space-supervisor-test'] });
  assert.deepEqual(argv.slice(3, 5), ['space-service:web', 'sh']);
  // Run on the host for 2.5 s: it starts at 0 s and, after a pause of 1 s, at 1 s; the next pause is 2 s.
  execFileSync('rm', ['-f', '/tmp/space-supervisor-test.log']);
  try {
    execFileSync('timeout', ['2.5', ...argv], { stdio: 'ignore' });
  } catch {
    // timeout ends it with 124
  }
  const runs = execFileSync('cat', ['/tmp/space-supervisor-test.log'], { encoding: 'utf8' }).trim().split('\n').length;
  execFileSync('rm', ['-f', '/tmp/space-supervisor-test.log']);
  assert.equal(runs, 2, 'started at 0 s and again after 1 s; the next pause is 2 s');
  const shell = serviceCommand({ name: 'api', cmd: 'python3 -m http.server' });
  assert.deepEqual(shell.slice(4), ['/bin/sh', '-c', 'python3 -m http.server']);
});
