import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { CONTROL_PLANE_CERTIFICATE_NAME, ErrorCode } from '@space/protocol';
import { Router, Upstream, closeServer, lineLog, listen, makeTestCertificates, makeTestClientCertificate, sendJson } from '@space/server-kit';
import { z } from 'zod';
import { refuseUnlessControlPlane } from './control-plane-peer.js';

test("over mutual TLS the node API serves a control plane's certificate only, not another of the same CA (a node's)", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-cp-peer-'));
  const certificates = makeTestCertificates(dir, ['127.0.0.1'], 'SPACE test cluster CA');
  const pem = (file: string) => readFileSync(file, 'utf8');
  const identityOf = (files: { certFile: string; keyFile: string }) => ({ cert: pem(files.certFile), key: pem(files.keyFile) });
  const controlPlane = identityOf(makeTestClientCertificate(dir, CONTROL_PLANE_CERTIFICATE_NAME, 'control-plane'));
  const node = identityOf(makeTestClientCertificate(dir, 'node-2', 'node-2'));
  const router = new Router({ log: lineLog(() => undefined), service: 'node' }).on('GET', '/node/v1/health', async ({ req, res }) => {
    refuseUnlessControlPlane(req);
    sendJson(res, 200, { ok: true });
  });
  const ca = pem(certificates.caFile);
  const { server, port } = await listen(router, '127.0.0.1', 0, {}, { ...identityOf(certificates), clientCa: ca });
  const as = (identity: { cert: string; key: string }) =>
    new Upstream(`https://127.0.0.1:${port}`, 't', ErrorCode.NODE_UNAVAILABLE, 'node-1', 3000, { ca, identity: () => identity });
  const [asControlPlane, asNode] = [as(controlPlane), as(node)];
  try {
    assert.deepEqual(await asControlPlane.json('GET', '/node/v1/health', undefined, z.object({ ok: z.boolean() })), { ok: true });
    await assert.rejects(asNode.json('GET', '/node/v1/health', undefined, z.unknown()), {
      code: ErrorCode.FORBIDDEN,
      message: `the node API serves control planes only: this client's certificate names "node-2"`,
    });
  } finally {
    asControlPlane.close();
    asNode.close();
    await closeServer(server);
    rmSync(dir, { recursive: true, force: true });
  }
});
