import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { CONTROL_PLANE_CERTIFICATE_NAME, ErrorCode, SpaceError } from '@space/protocol';
import { NodeCredentials } from './node-credentials.js';
import { openSqliteStore } from '../store/open-store.js';
import { Authenticator } from './auth.js';
import { ClusterCa, createClusterCa } from './cluster-ca.js';
import { ControlPlaneCertificate } from './control-plane-certificate.js';

const serverAuth = '1.3.6.1.5.5.7.3.1';
const clientAuth = '1.3.6.1.5.5.7.3.2';

async function credentials(ca: ClusterCa | null = null) {
  const clock = { now: Date.parse('2026-12-03T12:00:00.000Z') };
  const store = await openSqliteStore(':memory:');
  const auth = new Authenticator(store);
  await auth.installAdminKey('admin-key-0123456789abcdef');
  const logged: string[] = [];
  const nodes = new NodeCredentials({ store, auth, ca, now: () => clock.now, log: (line) => logged.push(line) });
  const request = (key: string) => ({ headers: { authorization: `Bearer ${key}` } }) as unknown as IncomingMessage;
  return { clock, auth, nodes, logged, request };
}

const refusedWith = (code: ErrorCode, message: RegExp) => (err: unknown) => err instanceof SpaceError && err.code === code && message.test(err.message);

test('a join token is used once, before it expires, and issues a credential that heartbeats for its node only', async () => {
  const { clock, nodes, logged, request } = await credentials();
  const { token, expiresAt } = await nodes.createJoinToken();
  assert.equal(expiresAt, '2026-12-03T13:00:00.000Z', 'an hour by default');
  const { credential } = await nodes.join({ nodeId: 'node-a', joinToken: token });
  assert.match(credential, /^snc_/);
  await assert.rejects(nodes.join({ nodeId: 'node-b', joinToken: token }), refusedWith(ErrorCode.UNAUTHORIZED, /used by node node-a at .*used once/));
  assert.ok(
    logged.some((l) => /node node-b may not join: the join token was used by node node-a/.test(l)),
    'the refusal is logged here too',
  );
  await assert.rejects(nodes.join({ nodeId: 'node-b', joinToken: 'snj_never-made' }), refusedWith(ErrorCode.UNAUTHORIZED, /no such join token/));
  const late = await nodes.createJoinToken({ ttlSec: 60 });
  clock.now += 61_000;
  await assert.rejects(nodes.join({ nodeId: 'node-b', joinToken: late.token }), refusedWith(ErrorCode.UNAUTHORIZED, /expired at/));

  const sender = await nodes.senderOf(request(credential));
  assert.deepEqual(sender, { nodeId: 'node-a' });
  nodes.checkSender(sender, 'node-a');
  assert.throws(() => nodes.checkSender(sender, 'node-b'), refusedWith(ErrorCode.FORBIDDEN, /node node-a's: it heartbeats for that node only, not node-b/));
  await assert.rejects(nodes.senderOf(request('snc_forged')), refusedWith(ErrorCode.UNAUTHORIZED, /unknown node credential/));
});

test('a join token for several nodes lets in that many, each with its own credential; a node drains itself with its credential, not another', async () => {
  const { nodes, request } = await credentials();
  const shared = await nodes.createJoinToken({ uses: 2 });
  assert.equal(shared.uses, 2);
  const a = await nodes.join({ nodeId: 'node-a', joinToken: shared.token });
  const b = await nodes.join({ nodeId: 'node-b', joinToken: shared.token });
  assert.notEqual(a.credential, b.credential);
  await assert.rejects(
    nodes.join({ nodeId: 'node-c', joinToken: shared.token }),
    refusedWith(ErrorCode.UNAUTHORIZED, /2 uses are spent \(the last by node node-b/),
  );

  await nodes.requireAdminOrNode(request(a.credential), 'node-a', 'drain');
  await nodes.requireAdminOrNode(request('admin-key-0123456789abcdef'), 'node-b', 'drain');
  await assert.rejects(
    nodes.requireAdminOrNode(request(a.credential), 'node-b', 'drain'),
    refusedWith(ErrorCode.FORBIDDEN, /node node-a's: it may drain that node only, not node-b/),
  );
});

test('the admin key still heartbeats (with a warning, once per node); other keys do not; a revoked credential is refused', async () => {
  const { auth, nodes, logged, request } = await credentials();
  const admin = await nodes.senderOf(request('admin-key-0123456789abcdef'));
  nodes.checkSender(admin, 'node-a');
  nodes.checkSender(admin, 'node-a');
  assert.equal(logged.filter((l) => /node node-a heartbeats with the admin key/.test(l)).length, 1);
  const { key } = await auth.createKey('tn_admin000');
  await assert.rejects(nodes.senderOf(request(key)), refusedWith(ErrorCode.FORBIDDEN, /admin key/));

  const { credential } = await nodes.join({ nodeId: 'node-a', joinToken: (await nodes.createJoinToken()).token });
  assert.deepEqual(await nodes.revoke('node-a'), { nodeId: 'node-a', revoked: true });
  assert.deepEqual(await nodes.revoke('node-a'), { nodeId: 'node-a', revoked: false });
  await assert.rejects(nodes.senderOf(request(credential)), refusedWith(ErrorCode.UNAUTHORIZED, /node node-a was revoked at .*new SPACE_NODE_JOIN_TOKEN/));
  // Joined again with a new token: a new credential, the old one gone.
  const again = await nodes.join({ nodeId: 'node-a', joinToken: (await nodes.createJoinToken()).token });
  assert.deepEqual(await nodes.senderOf(request(again.credential)), { nodeId: 'node-a' });
  await assert.rejects(nodes.senderOf(request(credential)), refusedWith(ErrorCode.UNAUTHORIZED, /unknown node credential/));
  // A node credential is no API key: it reaches no other route.
  await assert.rejects(auth.authenticate(request(again.credential)), refusedWith(ErrorCode.UNAUTHORIZED, /invalid API key/));
});

test("with a cluster CA, a join with a certificate request gets the node API's certificate: for that node and its hosts, whatever the request says", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-cluster-ca-'));
  try {
    assert.equal(await createClusterCa(path.join(dir, 'ca')), true);
    assert.equal(await createClusterCa(path.join(dir, 'ca')), false, 'made once');
    const ca = await ClusterCa.open(path.join(dir, 'ca'));
    const { nodes } = await credentials(ca);
    execFileSync('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', path.join(dir, 'node.key')]);
    // The request names another node and asks to be a CA: neither is granted.
    const csr = execFileSync('openssl', ['req', '-new', '-key', path.join(dir, 'node.key'), '-subj', '/CN=node-b', '-addext', 'basicConstraints=CA:TRUE'], {
      encoding: 'utf8',
    });
    const reply = await nodes.join({ nodeId: 'node-a', joinToken: (await nodes.createJoinToken()).token, csr, hosts: ['127.0.0.1', 'node-a.internal'] });
    assert.equal(reply.caCertificate, ca.certificate);
    const certificate = new X509Certificate(reply.certificate!);
    assert.ok(certificate.checkIssued(new X509Certificate(ca.certificate)) && certificate.verify(new X509Certificate(ca.certificate).publicKey));
    assert.equal(certificate.subject, 'CN=node-a');
    assert.equal(certificate.subjectAltName, 'IP Address:127.0.0.1, DNS:node-a.internal');
    assert.equal(certificate.ca, false);
    assert.deepEqual(certificate.keyUsage, [serverAuth], "for serving only: a node's certificate is no client of other node APIs");
    assert.ok(certificate.checkPrivateKey(createPrivateKey(readFileSync(path.join(dir, 'node.key')))), "the certificate is of the node's own key");

    await assert.rejects(
      nodes.join({
        nodeId: 'node-c',
        joinToken: (await nodes.createJoinToken()).token,
        csr: '-----BEGIN CERTIFICATE REQUEST-----\nbm9wZQ==\n-----END CERTIFICATE REQUEST-----\n',
        hosts: ['10.0.0.3'],
      }),
      refusedWith(ErrorCode.VALIDATION_FAILED, /not a certificate request/),
    );
    await assert.rejects(nodes.join({ nodeId: 'node-c', joinToken: 'snj_x', csr }), refusedWith(ErrorCode.VALIDATION_FAILED, /hosts/));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a control plane's client certificate: of the cluster CA, named as node APIs take it, for clients only; renewed in place with a new key", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-cluster-ca-'));
  try {
    await createClusterCa(dir);
    const ca = await ClusterCa.open(dir);
    const issuer = new X509Certificate(ca.certificate);
    const certificate = await ControlPlaneCertificate.issue(ca, () => undefined);
    const first = certificate.identity();
    const check = (identity: { cert: string; key: string }) => {
      const cert = new X509Certificate(identity.cert);
      assert.ok(cert.checkIssued(issuer) && cert.verify(issuer.publicKey));
      assert.equal(cert.subject, `CN=${CONTROL_PLANE_CERTIFICATE_NAME}`);
      assert.deepEqual(cert.keyUsage, [clientAuth]);
      assert.equal(cert.ca, false);
      assert.ok(cert.checkPrivateKey(createPrivateKey(identity.key)));
      const days = (Date.parse(cert.validTo) - Date.now()) / 86_400_000;
      assert.ok(days > 6.9 && days <= 7, `valid a week: ${days} days`);
      return cert;
    };
    const firstCert = check(first);
    await certificate.renew();
    const renewed = check(certificate.identity());
    assert.notEqual(renewed.serialNumber, firstCert.serialNumber);
    assert.notEqual(certificate.identity().key, first.key, 'a new key each time');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a node renews its API's certificate with its own credential, for itself only: not with the admin key, not for another node, not without a CA", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-cluster-ca-'));
  try {
    await createClusterCa(path.join(dir, 'ca'));
    const ca = await ClusterCa.open(path.join(dir, 'ca'));
    const { nodes, request } = await credentials(ca);
    const { credential } = await nodes.join({ nodeId: 'node-a', joinToken: (await nodes.createJoinToken()).token });
    execFileSync('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', path.join(dir, 'new.key')]);
    const csr = execFileSync('openssl', ['req', '-new', '-key', path.join(dir, 'new.key'), '-subj', '/CN=whatever'], { encoding: 'utf8' });
    const asNode = await nodes.senderOf(request(credential));
    const reply = await nodes.renewCertificate(asNode, { nodeId: 'node-a', csr, hosts: ['10.0.0.7'] });
    assert.equal(reply.caCertificate, ca.certificate);
    const renewed = new X509Certificate(reply.certificate);
    assert.ok(renewed.checkIssued(new X509Certificate(ca.certificate)));
    assert.equal(renewed.subject, 'CN=node-a');
    assert.equal(renewed.subjectAltName, 'IP Address:10.0.0.7');
    assert.ok(renewed.checkPrivateKey(createPrivateKey(readFileSync(path.join(dir, 'new.key')))), 'for the new key');

    await assert.rejects(
      nodes.renewCertificate(asNode, { nodeId: 'node-b', csr, hosts: ['10.0.0.8'] }),
      refusedWith(ErrorCode.FORBIDDEN, /node node-a's: .*not node-b's/),
    );
    const asAdmin = await nodes.senderOf(request('admin-key-0123456789abcdef'));
    await assert.rejects(
      nodes.renewCertificate(asAdmin, { nodeId: 'node-a', csr, hosts: ['10.0.0.7'] }),
      refusedWith(ErrorCode.FORBIDDEN, /own credential, not the admin key/),
    );
    const withoutCa = await credentials(null);
    const other = await withoutCa.nodes.join({ nodeId: 'node-a', joinToken: (await withoutCa.nodes.createJoinToken()).token });
    await assert.rejects(
      withoutCa.nodes.renewCertificate(await withoutCa.nodes.senderOf(withoutCa.request(other.credential)), { nodeId: 'node-a', csr, hosts: ['10.0.0.7'] }),
      refusedWith(ErrorCode.VALIDATION_FAILED, /no cluster CA/),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
