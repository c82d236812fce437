import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { Router, closeServer, lineLog, listen, makeTestCertificates, readJson, sendJson, signTestCertificateRequest } from '@space/server-kit';
import { z } from 'zod';
import { NodeCertificateRenewal } from './node-certificate-renewal.js';

/**
 * A node's identity files (a certificate of `ours`, valid 2 days) and a loopback stand-in for the
 * control planes' renewal route that signs what it is asked with the CA in `signWith`.
 */
async function setup(signWith: 'ours' | 'theirs') {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-renewal-'));
  const cas = { ours: makeTestCertificates(path.join(dir, 'ours'), ['127.0.0.1']), theirs: makeTestCertificates(path.join(dir, 'theirs'), ['127.0.0.1']) };
  const node = path.join(dir, 'node');
  mkdirSync(node);
  copyFileSync(cas.ours.certFile, path.join(node, 'tls.crt'));
  copyFileSync(cas.ours.keyFile, path.join(node, 'tls.key'));
  copyFileSync(cas.ours.caFile, path.join(node, 'ca.crt'));
  const asked: string[] = [];
  const router = new Router({ log: lineLog(() => undefined), service: 'cp' }).on('POST', '/v1/nodes/certificate', async ({ req, res }) => {
    asked.push(String(req.headers.authorization));
    const body = await readJson(req, z.object({ nodeId: z.string(), csr: z.string(), hosts: z.array(z.string()) }));
    const ca = path.dirname(cas[signWith].caFile);
    const certificate = signTestCertificateRequest(ca, body.csr, 397);
    sendJson(res, 200, { certificate, caCertificate: readFileSync(path.join(ca, 'ca.crt'), 'utf8') });
  });
  const { server, port } = await listen(router, '127.0.0.1', 0);
  const served: { cert: string; clientCa?: string }[] = [];
  const warnings: string[] = [];
  const renewal = (renewBeforeDays: number) =>
    new NodeCertificateRenewal({
      dir: node,
      nodeId: 'node-1',
      hosts: ['127.0.0.1'],
      controlPlanes: [`http://127.0.0.1:${port}`],
      credential: 'snc_test',
      renewBeforeMs: renewBeforeDays * 86_400_000,
      serve: (tls) => void served.push(tls),
      log: { info: () => undefined, warn: (m) => void warnings.push(m), error: () => undefined },
    });
  const file = (name: string) => path.join(node, name);
  const done = async () => {
    await closeServer(server);
    rmSync(dir, { recursive: true, force: true });
  };
  return { cas, renewal, asked, served, warnings, file, done };
}

test("a node renews its API's certificate when it is due: asked with its credential, kept in place, served at once; the CA stays the one it joined with", async () => {
  const t = await setup('ours');
  try {
    const before = readFileSync(t.file('tls.crt'), 'utf8');
    assert.equal(await t.renewal(1).renewIfDue(), false, '2 days left, renewed with fewer than 1');
    assert.deepEqual(t.asked, []);
    assert.equal(await t.renewal(30).renewIfDue(), true);
    assert.deepEqual(t.asked, ['Bearer snc_test']);
    const renewed = new X509Certificate(readFileSync(t.file('tls.crt')));
    assert.notEqual(renewed.serialNumber, new X509Certificate(before).serialNumber);
    assert.ok(renewed.checkPrivateKey(createPrivateKey(readFileSync(t.file('tls.key')))), "the kept key is the new certificate's");
    assert.deepEqual(
      t.served.map((s) => s.cert),
      [readFileSync(t.file('tls.crt'), 'utf8')],
    );
    assert.equal(t.served[0]!.clientCa, readFileSync(t.cas.ours.caFile, 'utf8'));
    assert.equal(existsSync(t.file('tls.key.new')) || existsSync(t.file('tls.crt.new')), false);
  } finally {
    await t.done();
  }
});

test('a renewal answered with a certificate of another CA (of the same name) is not taken: the node keeps serving its own and says why', async () => {
  const t = await setup('theirs');
  try {
    const before = readFileSync(t.file('tls.crt'), 'utf8');
    assert.equal(await t.renewal(30).renewIfDue(), false);
    assert.equal(readFileSync(t.file('tls.crt'), 'utf8'), before);
    assert.equal(readFileSync(t.file('ca.crt'), 'utf8'), readFileSync(t.cas.ours.caFile, 'utf8'));
    assert.deepEqual(t.served, []);
    assert.match(t.warnings.join('\n'), /could not renew .*not of the cluster CA this node joined with: not taken/);
  } finally {
    await t.done();
  }
});
