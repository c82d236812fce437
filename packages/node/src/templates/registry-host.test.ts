import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pullError, registryHost } from './registry-host.js';

test('the registry of a docker:// reference, as Docker reads it', () => {
  const cases: [string, string | null][] = [
    ['docker://alpine', 'registry-1.docker.io'],
    ['docker://library/alpine:3', 'registry-1.docker.io'],
    ['docker://ghcr.io/org/img:tag', 'ghcr.io'],
    ['docker://127.0.0.1:7896/x', '127.0.0.1'],
    ['docker://localhost/x', 'localhost'],
    ['docker://LOCALHOST:5000/x', 'localhost'],
    ['docker://[::1]:5000/x', '::1'],
    ['docker://[::ffff:127.0.0.1]/x', '::ffff:127.0.0.1'],
    ['docker://registry.example:443/a/b@sha256:00', 'registry.example'],
    ['oci:/tmp/x', null],
  ];
  for (const [reference, host] of cases) assert.equal(registryHost(reference), host, reference);
});

test("a pull's error never says what the network answered", () => {
  assert.equal(
    pullError('pinging container registry 127.0.0.1:7896: Get "https://127.0.0.1:7896/v2/": dial tcp 127.0.0.1:7896: connect: connection refused'),
    'could not connect to the registry',
  );
  assert.equal(pullError('Get "https://10.0.0.5/v2/": dial tcp 10.0.0.5:443: i/o timeout'), 'could not connect to the registry');
  assert.match(pullError('reading manifest latest in ghcr.io/x/y: manifest unknown'), /manifest unknown/);
});
