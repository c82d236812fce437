import assert from 'node:assert/strict';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { HeartbeatWrites } from '../cluster/heartbeat-writes.js';
import { Authenticator, adminTenantId, hashKey } from '../tenants/auth.js';
import { migrations } from './migrations.js';
import { openSqliteStore, openStore } from './open-store.js';
import { PostgresDatabase } from './postgres-database.js';
import { archivedAuditEntries, type HeartbeatRow, type SessionRow } from './store.js';
import { checkpoint, session } from '../test-support/store-rows.js';
import { storeEngines } from '../test-support/store-engines.js';

// One contract, two engines: every test below runs on SQLite and on a real PostgreSQL server.
const engines = storeEngines();

for (const engine of engines.all) {
  const named = (title: string) => `${engine.name}: ${title}`;

  test(named('keys are stored hashed and resolve to their tenant; a new configured admin key replaces the old one'), async () => {
    const store = await engine.open('keys');
    const auth = new Authenticator(store);
    await auth.installAdminKey('first');
    await auth.installAdminKey('admin-secret');
    await auth.installAdminKey('admin-secret');
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    const { key } = await auth.createKey('tn_a');
    assert.equal(await store.findApiKey(key), null, 'the raw key must not be stored');
    assert.equal((await store.findApiKey(hashKey(key)))?.tenantId, 'tn_a');
    assert.deepEqual(await store.findApiKey(hashKey('admin-secret')).then((k) => [k?.tenantId, k?.admin]), [adminTenantId, true]);
    assert.equal(await store.findApiKey(hashKey('first')), null);
    await assert.rejects(auth.createKey('tn_missing'), { code: 'TENANT_NOT_FOUND' });
  });

  test(named('placements: an epoch advances only from the one read, and a placed update holds only at its placement'), async () => {
    const store = await engine.open('placements');
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    await store.insertSession(session('ses_p', 'tn_a'));
    assert.equal(await store.advancePlacement('ses_p', 0), true);
    assert.equal(await store.advancePlacement('ses_p', 0), false, 'a second control plane that read epoch 0 too');
    assert.equal((await store.getSession('tn_a', 'ses_p'))?.placementEpoch, 1);
    assert.equal(await store.updatePlacedSession('ses_p', 0, { status: 'stopped' }), false);
    assert.equal((await store.getSession('tn_a', 'ses_p'))?.status, 'running', 'untouched by the stale update');
    assert.equal(await store.updatePlacedSession('ses_p', 1, { status: 'stopped', sandboxId: null }), true);
    assert.deepEqual(await store.getSession('tn_a', 'ses_p').then((s) => [s?.status, s?.sandboxId, s?.placementEpoch]), ['stopped', null, 1]);
    assert.equal(await store.advancePlacement('ses_missing', 0), false);
  });

  test(named('sessions are scoped by tenant, keep every field, and survive reopening'), async () => {
    const store = await engine.open('sessions');
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    await store.insertTenant({ id: 'tn_b', name: 'b', createdAt: '' });
    const row = session('ses_1', 'tn_a', '2026-01-01T00:00:00.000Z');
    await store.insertSession(row);
    await store.insertSession(session('ses_0', 'tn_a', '2025-12-31T23:59:59.999Z'));
    assert.deepEqual(await store.getSession('tn_a', 'ses_1'), row);
    assert.equal(await store.getSession('tn_b', 'ses_1'), null);
    assert.deepEqual(await store.listSessions('tn_b'), []);
    assert.deepEqual(
      (await store.listSessions('tn_a')).map((s) => s.id),
      ['ses_0', 'ses_1'],
      'oldest first',
    );
    assert.equal(await store.countSessions('tn_a'), 2);
    assert.equal(await store.countSessions('tn_b'), 0);
    await store.deleteSession('ses_0');
    assert.equal(await store.countSessions('tn_a'), 1, 'the count follows deletes');
    await store.insertSession(session('ses_0', 'tn_a', '2025-12-31T23:59:59.999Z'));
    await store.updateSession('ses_1', { status: 'stopped', sandboxId: null, resumeNote: 'went back' });
    const reopened = await engine.open('sessions');
    const again = await reopened.getSession('tn_a', 'ses_1');
    assert.deepEqual([again?.status, again?.sandboxId, again?.resumeNote, again?.nodeId], ['stopped', null, 'went back', 'node_x']);
    const start = (note: string | null) => ({
      id: 'sbx_1',
      sessionId: 'ses_1',
      nodeId: 'n',
      startedAt: '2026-01-01T00:00:01.000Z',
      endedAt: null,
      endReason: null,
      restoredFrom: null,
      note,
    });
    assert.equal(await store.recordPlacedStart(1, { status: 'running' }, start('stale')), false, 'a start at a placement the session is not at');
    assert.deepEqual(await store.listSandboxHistory('ses_1'), [], 'is not recorded');
    assert.equal((await store.getSession('tn_a', 'ses_1'))?.status, 'stopped', 'and changes nothing');
    assert.equal(await store.recordPlacedStart(0, { status: 'running' }, start(null)), true);
    assert.equal((await store.getSession('tn_a', 'ses_1'))?.status, 'running', 'the row and its history change together');
    await store.recordPlacedStart(0, { status: 'running' }, start('again'));
    await store.recordSandboxEnd('sbx_1', 'died');
    await store.recordSandboxEnd('sbx_1', 'killed');
    const history = await store.listSandboxHistory('ses_1');
    assert.deepEqual(
      history.map((h) => [h.id, h.endReason, h.note]),
      [['sbx_1', 'died', null]],
      'a start recorded twice is one entry; the first end stands',
    );
    await store.deleteSession('ses_1');
    assert.equal(await store.getSession('tn_a', 'ses_1'), null);
    assert.deepEqual(await store.listSandboxHistory('ses_1'), [], 'its history goes with it');
  });

  test(
    named("a cut-off copy's record: its real end corrects 'lost', and its egress audit is kept once, newest first bounded, gone with the session"),
    async () => {
      const store = await engine.open('cut-off');
      await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
      await store.insertSession(session('ses_c', 'tn_a'));
      const started = (id: string, nodeId: string, startedAt: string) => ({
        id,
        sessionId: 'ses_c',
        nodeId,
        startedAt,
        endedAt: null,
        endReason: null,
        restoredFrom: null,
        note: null,
      });
      await store.recordPlacedStart(0, { status: 'running' }, started('sbx_old', 'node-1', '2026-01-01T00:00:00.000Z'));
      await store.recordPlacedStart(0, { status: 'running' }, started('sbx_new', 'node-2', '2026-01-01T00:01:00.000Z'));
      await store.recordSandboxEnd('sbx_old', 'lost');
      await store.correctSandboxEnd('ses_c', 'node-2', { endedAt: 'x', reason: 'fenced', note: 'not lost' });
      await store.correctSandboxEnd('ses_c', 'node-1', { endedAt: '2026-01-01T00:00:06.000Z', reason: 'fenced', note: 'paused by its node' });
      assert.deepEqual(
        (await store.listSandboxHistory('ses_c')).map((h) => [h.id, h.endedAt, h.endReason, h.note]),
        [
          ['sbx_old', '2026-01-01T00:00:06.000Z', 'fenced', 'paused by its node'],
          ['sbx_new', null, null, null],
        ],
        'only a sandbox recorded lost on that node is corrected',
      );

      const entry = (i: number) => ({
        time: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, i)).toISOString(),
        sandboxId: 'sbx_old',
        scheme: 'http' as const,
        host: 'plain.test',
        method: 'GET',
        path: `/beat?i=${i}`,
        status: 200,
        decision: 'allowed' as const,
        bytesSent: 10,
        bytesReceived: 20,
        durationMs: 1.5,
        secrets: [],
      });
      await store.archiveEgressAudit('ses_c', [entry(2), entry(1)]);
      await store.archiveEgressAudit('ses_c', [entry(1), entry(2), entry(3)]);
      assert.deepEqual(
        (await store.listArchivedEgressAudit('ses_c', 10)).map((e) => e.path),
        ['/beat?i=1', '/beat?i=2', '/beat?i=3'],
        'oldest first, each entry once though kept twice',
      );
      assert.deepEqual(
        (await store.listArchivedEgressAudit('ses_c', 1)).map((e) => e.path),
        ['/beat?i=3'],
        'the newest of a page',
      );
      await store.archiveEgressAudit(
        'ses_c',
        Array.from({ length: archivedAuditEntries + 5 }, (_, i) => entry(10 + i)),
      );
      const kept = await store.listArchivedEgressAudit('ses_c', archivedAuditEntries + 100);
      assert.equal(kept.length, archivedAuditEntries, 'only the newest are kept');
      assert.equal(kept.at(-1)?.path, `/beat?i=${10 + archivedAuditEntries + 4}`);
      await store.deleteSession('ses_c');
      assert.deepEqual(await store.listArchivedEgressAudit('ses_c', 10), [], 'the audit goes with the session');
    },
  );

  test(named('idempotency keys: claimed once per tenant, hold their outcome, taken over once expired, swept'), async () => {
    const store = await engine.open('idempotency');
    const claim = (tenantId: string, expiresAt: number) => ({ tenantId, key: 'k1', operation: 'POST /v1/x', expiresAt });
    assert.equal(await store.claimIdempotencyKey(claim('tn_a', 2000), 1000), null, 'claimed');
    assert.equal(await store.claimIdempotencyKey(claim('tn_b', 2000), 1000), null, "another tenant's key of the same name");
    assert.deepEqual(await store.claimIdempotencyKey(claim('tn_a', 2500), 1500), { ...claim('tn_a', 2000), outcome: null }, 'held by the call under way');
    await store.renewIdempotencyKey('tn_a', 'k1', 3000);
    await store.finishIdempotencyKey('tn_a', 'k1', { status: 201, body: '{"id":"x"}' }, 5_000_000_000_000);
    await store.finishIdempotencyKey('tn_a', 'k1', { status: 500, body: '{}' }, 1);
    await store.releaseIdempotencyKey('tn_a', 'k1');
    assert.deepEqual((await store.claimIdempotencyKey(claim('tn_a', 9000), 8000))?.outcome, { status: 201, body: '{"id":"x"}' }, 'the first outcome stands');
    assert.equal(await store.claimIdempotencyKey(claim('tn_b', 9000), 8000), null, 'an expired claim is taken over');
    assert.equal(await store.deleteExpiredIdempotencyKeys(5_000_000_000_001), 2);
  });

  test(
    named('node join tokens are used as many times as they allow, before they expire; node credentials are replaced by a new join and revoked'),
    async () => {
      const store = await engine.open('node-credentials');
      await store.insertNodeJoinToken({ hash: 'j1', createdAt: '2026-01-01T00:00:00Z', expiresAt: '2026-01-01T01:00:00Z', uses: 1 });
      await store.insertNodeJoinToken({ hash: 'j2', createdAt: '2026-01-01T00:00:00Z', expiresAt: '2026-01-01T01:00:00Z', uses: 1 });
      await store.insertNodeJoinToken({ hash: 'j3', createdAt: '2026-01-01T00:00:00Z', expiresAt: '2026-01-01T01:00:00Z', uses: 3 });
      const threeAtOnce = await Promise.all(['n1', 'n2', 'n3', 'n4'].map((n) => store.useNodeJoinToken('j3', n, '2026-01-01T00:10:00Z')));
      assert.deepEqual(threeAtOnce.map((u) => u.outcome).sort(), ['used', 'used', 'used', 'used-before'], 'three of four at once');
      assert.deepEqual(await store.useNodeJoinToken('j3', 'n5', '2026-01-01T00:11:00Z'), {
        ...(await store.useNodeJoinToken('j3', 'n6', '2026-01-01T00:12:00Z')),
        outcome: 'used-before',
        uses: 3,
      });
      assert.deepEqual(await store.useNodeJoinToken('nope', 'node-a', '2026-01-01T00:10:00Z'), { outcome: 'unknown' });
      const [first, second] = await Promise.all([
        store.useNodeJoinToken('j1', 'node-a', '2026-01-01T00:10:00Z'),
        store.useNodeJoinToken('j1', 'node-b', '2026-01-01T00:10:00Z'),
      ]);
      assert.deepEqual([first.outcome, second.outcome].sort(), ['used', 'used-before'], 'one of two at once');
      assert.deepEqual(await store.useNodeJoinToken('j1', 'node-a', '2026-01-01T00:20:00Z'), {
        outcome: 'used-before',
        usedBy: first.outcome === 'used' ? 'node-a' : 'node-b',
        usedAt: '2026-01-01T00:10:00Z',
        uses: 1,
      });
      assert.deepEqual(await store.useNodeJoinToken('j2', 'node-c', '2026-01-01T01:00:00Z'), { outcome: 'expired', expiresAt: '2026-01-01T01:00:00Z' });

      await store.putNodeCredential({ nodeId: 'node-a', hash: 'c1', createdAt: '2026-01-01T00:10:00Z' });
      assert.deepEqual(await store.findNodeCredential('c1'), { nodeId: 'node-a', hash: 'c1', createdAt: '2026-01-01T00:10:00Z', revokedAt: null });
      assert.equal(await store.revokeNodeCredential('node-a', '2026-01-02T00:00:00Z'), true);
      assert.equal(await store.revokeNodeCredential('node-a', '2026-01-03T00:00:00Z'), false, 'revoked once');
      assert.equal((await store.findNodeCredential('c1'))?.revokedAt, '2026-01-02T00:00:00Z');
      await store.putNodeCredential({ nodeId: 'node-a', hash: 'c2', createdAt: '2026-01-04T00:00:00Z' });
      assert.equal(await store.findNodeCredential('c1'), null, 'joined again: the old credential is gone');
      assert.equal((await store.findNodeCredential('c2'))?.revokedAt, null);
      assert.equal(await store.revokeNodeCredential('node-z', '2026-01-04T00:00:00Z'), false);
    },
  );

  test(
    named(
      'heartbeats written together register new nodes and refresh known ones (their storage too), keeping their status; two writers of the same nodes at once do not deadlock',
    ),
    async () => {
      const store = await engine.open('heartbeats');
      const row = (id: string, at: string, sandboxes = 0, storage: HeartbeatRow['storage'] = 'ok'): HeartbeatRow => ({
        id,
        url: `https://${id}.invalid`,
        token: `sealed-${id}`,
        capacity: { memoryMb: 4096, cpus: 2 },
        storage,
        sandboxes,
        lastHeartbeatAt: at,
      });
      await store.recordHeartbeats([row('node-a', '2026-01-01T00:00:00Z'), row('node-b', '2026-01-01T00:00:00Z', 0, 'low')]);
      await store.setNodeStatus('node-a', 'draining');
      await store.recordHeartbeats([row('node-a', '2026-01-01T00:00:02Z', 3, 'read-only'), row('node-c', '2026-01-01T00:00:02Z')]);
      await store.recordHeartbeats([]);
      assert.deepEqual(
        (await store.listNodes()).map((n) => [n.id, n.status, n.storage, n.sandboxes, n.registeredAt, n.lastHeartbeatAt]),
        [
          ['node-a', 'draining', 'read-only', 3, '2026-01-01T00:00:00Z', '2026-01-01T00:00:02Z'],
          ['node-b', 'ready', 'low', 0, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'],
          ['node-c', 'ready', 'ok', 0, '2026-01-01T00:00:02Z', '2026-01-01T00:00:02Z'],
        ],
      );
      // Two control planes, each writing all 40 nodes' beats in an order of its own, in rounds at once.
      const writers = [new HeartbeatWrites(store, 0), new HeartbeatWrites(await engine.open('heartbeats'), 0)];
      const ids = Array.from({ length: 40 }, (_, i) => `node-${String(i).padStart(2, '0')}`);
      for (let round = 0; round < 10; round++) {
        const at = new Date(Date.UTC(2026, 0, 1, 0, 1, round)).toISOString();
        await Promise.all(writers.map((w, i) => Promise.all((i === 0 ? ids : [...ids].reverse()).map((id) => w.write(row(id, at, i))))));
      }
      const last = (await store.listNodes()).filter((n) => ids.includes(n.id));
      assert.equal(last.length, 40);
      assert.ok(last.every((n) => n.lastHeartbeatAt === '2026-01-01T00:01:09.000Z'));
    },
  );

  test(
    named("ship bases: older ones and a deleted session's are retired, and unused once no checkpoint is stored against them; migration 32 retires them alike"),
    async () => {
      const store = await engine.open('ship-bases');
      await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
      for (const id of ['ses_b1', 'ses_b2', 'ses_b3']) await store.insertSession(session(id, 'tn_a'));
      const object = { key: 'k', bytes: 1, sha256: '0'.repeat(64) };
      const base = (id: string, sessionId: string, createdAt: string) => store.insertShipBase({ id, sessionId, object, volumeObjects: [], createdAt });
      const unused = async () => (await store.unusedShipBases()).map((b) => b.id);
      await base('bse_b1old', 'ses_b1', '2026-01-01T00:00:00Z');
      await store.insertCheckpoint(checkpoint('ckp_b1', 'ses_b1', 'tn_a'));
      assert.equal(await store.claimShipment('ckp_b1', 'cp/1', Date.now() + 10_000, Date.now()), true);
      assert.equal(await store.markShipped('ckp_b1', 'cp/1', { at: '2026-01-01T00:00:01Z', baseId: 'bse_b1old', objects: [object] }), true);
      await base('bse_b1new', 'ses_b1', '2026-01-02T00:00:00Z');
      await base('bse_b2', 'ses_b2', '2026-01-01T00:00:00Z');
      await base('bse_b3new', 'ses_b3', '2026-01-02T00:00:00Z');
      await base('bse_b3late', 'ses_b3', '2026-01-01T00:00:00Z');
      assert.deepEqual(await unused(), ['bse_b3late'], 'an older base that came late is retired at once; one a checkpoint is stored against is kept');
      await store.deleteCheckpoint('ckp_b1');
      await store.deleteSession('ses_b2');
      await base('bse_b2after', 'ses_b2', '2026-01-03T00:00:00Z');
      assert.deepEqual(await unused(), ['bse_b1old', 'bse_b2', 'bse_b3late', 'bse_b2after'], 'in the order they were made');
      // Migration 32's backfill on the same rows, every mark taken off first: the same bases retired.
      const db = engine.name === 'postgres' ? await PostgresDatabase.open(await engine.location('ship-bases')) : null;
      const sqlite = engine.name === 'sqlite' ? new Database(await engine.location('ship-bases')) : null;
      const run = (sql: string) => (db ? db.run(sql) : Promise.resolve(sqlite!.prepare(sql).run()));
      try {
        await run('UPDATE ship_bases SET retired = 0');
        await run(migrations.find((m) => m.version === 32)!.statements(engine.name)[1]!);
      } finally {
        await db?.close();
        sqlite?.close();
      }
      assert.deepEqual(await unused(), ['bse_b1old', 'bse_b2', 'bse_b3late', 'bse_b2after']);
    },
  );

  test(named("a tenant's data key: one per tenant, the first of two made at once stands"), async () => {
    const store = await engine.open('data-keys');
    const row = (id: string, tenantId: string) => ({ id, tenantId, wrapped: `v1:${id}`, createdAt: '2026-01-01T00:00:00Z' });
    const outcomes = await Promise.all([store.insertDataKey(row('dk_a1', 'tn_a')), store.insertDataKey(row('dk_a2', 'tn_a'))]);
    assert.deepEqual([...outcomes].sort(), [false, true]);
    const first = row(outcomes[0] ? 'dk_a1' : 'dk_a2', 'tn_a');
    assert.deepEqual(await store.tenantDataKey('tn_a'), first);
    assert.equal(await store.insertDataKey(row('dk_a3', 'tn_a')), false);
    assert.deepEqual(await store.tenantDataKey('tn_a'), first, 'the first stays');
    assert.equal(await store.tenantDataKey('tn_b'), null);
  });

  test(named('periodic lookups: the sessions maintenance may have work for, by ids, on a node, counted by status'), async () => {
    const store = await engine.open('periodic');
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    const stopped = { status: 'stopped' as const, sandboxId: null, nodeId: null, sandboxStartedAt: null, expiresAt: null };
    await store.insertSession(session('ses_running', 'tn_a', '2026-01-01T00:00:01.000Z'));
    await store.insertSession({ ...session('ses_starting', 'tn_a', '2026-01-01T00:00:02.000Z'), ...stopped, status: 'starting' });
    await store.insertSession({ ...session('ses_stopped', 'tn_a', '2026-01-01T00:00:03.000Z'), ...stopped, volumeNodeId: 'node_y' });
    await store.insertSession({ ...session('ses_expired', 'tn_a', '2026-01-01T00:00:04.000Z'), ...stopped, expiresAt: '2026-06-01T00:00:00.000Z' });
    await store.insertSession({ ...session('ses_later', 'tn_a', '2026-01-01T00:00:05.000Z'), ...stopped, expiresAt: '2027-06-01T00:00:00.000Z' });
    const ids = (rows: SessionRow[]) => rows.map((r) => r.id);
    assert.deepEqual(ids(await store.listSessionsToMaintain(Date.parse('2026-12-01T00:00:00.000Z'))), ['ses_running', 'ses_starting', 'ses_expired']);
    assert.deepEqual(ids(await store.findSessions(['ses_later', 'ses_gone', 'ses_stopped'])).sort(), ['ses_later', 'ses_stopped']);
    assert.deepEqual(await store.findSessions([]), []);
    assert.deepEqual(ids(await store.listSessionsOnNode('node_y')), ['ses_stopped']);
    assert.deepEqual(ids(await store.listSessionsOnNode('node_x')), ['ses_running', 'ses_starting', 'ses_expired', 'ses_later']);
    assert.deepEqual(await store.countSessionsByStatus(), { running: 1, starting: 1, stopped: 3 });
    assert.deepEqual([...(await store.activeByNode())], [['node_x', 2]], 'running and starting, by the node of their volume');
    // A control plane's share: the sessions on its nodes, and those on no node.
    const now = Date.parse('2026-12-01T00:00:00.000Z');
    assert.deepEqual(ids(await store.listSessionsToMaintain(now, ['node_x'])), ['ses_running', 'ses_starting', 'ses_expired']);
    assert.deepEqual(ids(await store.listSessionsToMaintain(now, ['node_y'])), []);
    await store.insertSession({
      ...session('ses_nowhere', 'tn_a', '2026-01-01T00:00:06.000Z'),
      ...stopped,
      volumeNodeId: null,
      expiresAt: '2026-06-01T00:00:00.000Z',
    });
    assert.deepEqual(ids(await store.listSessionsToMaintain(now, ['node_y'])), ['ses_nowhere']);
    assert.deepEqual(ids(await store.listSessionsToMaintain(now, ['node_y', 'node_x'])), ['ses_running', 'ses_starting', 'ses_expired', 'ses_nowhere']);
    // Placement's counts follow every way a session starts or stops counting: status, node, delete.
    await store.updateSession('ses_starting', { status: 'running' });
    assert.deepEqual([...(await store.activeByNode())], [['node_x', 2]], 'starting to running: still counted once');
    await store.updateSession('ses_running', { volumeNodeId: 'node_y' });
    await store.updateSession('ses_stopped', { status: 'starting' });
    assert.deepEqual(
      new Map(await store.activeByNode()),
      new Map([
        ['node_x', 1],
        ['node_y', 2],
      ]),
    );
    await store.updateSession('ses_starting', { status: 'stopped' });
    await store.deleteSession('ses_running');
    assert.deepEqual([...(await store.activeByNode())], [['node_y', 1]]);
    assert.deepEqual(await store.countSessionsByStatus(), { starting: 1, stopped: 4 }, 'the counts by status follow too');
  });

  test(named('next maintenance: a sandbox not due until its time, due at once when its row changes; the sandboxes recorded, by node'), async () => {
    const store = await engine.open('maintain-after');
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    await store.insertSession(session('ses_a', 'tn_a', '2026-01-01T00:00:01.000Z'));
    await store.insertSession({ ...session('ses_b', 'tn_a', '2026-01-01T00:00:02.000Z'), sandboxId: 'sbx_b', nodeId: 'node_z', volumeNodeId: 'node_z' });
    const now = Date.parse('2026-12-01T00:00:00.000Z');
    const due = async (at: number) => (await store.listSessionsToMaintain(at)).map((r) => r.id);
    assert.deepEqual(await due(now), ['ses_a', 'ses_b'], 'never visited: due');
    const a = (await store.findSession('ses_a'))!;
    await store.scheduleMaintenance([{ id: 'ses_a', at: now + 60_000, basis: a }]);
    assert.deepEqual(await due(now), ['ses_b']);
    assert.deepEqual(await due(now + 60_000), ['ses_a', 'ses_b'], 'due at its time');
    await store.updateSession('ses_a', { lastActiveAt: '2026-12-01T00:00:01.000Z' });
    assert.deepEqual(await due(now), ['ses_b'], 'a use changes nothing it is worked out from');
    await store.updateSession('ses_a', { expiresAt: '2026-12-01T00:00:30.000Z' });
    assert.deepEqual(await due(now), ['ses_a', 'ses_b'], 'a timeout set: due at once');
    // Worked out from a row that changed since: not recorded; the others written with it are.
    await store.scheduleMaintenance([
      { id: 'ses_a', at: now + 60_000, basis: a },
      { id: 'ses_b', at: now + 60_000, basis: (await store.findSession('ses_b'))! },
    ]);
    assert.deepEqual(await due(now), ['ses_a']);
    await store.scheduleMaintenance([{ id: 'ses_a', at: now + 60_000, basis: (await store.findSession('ses_a'))! }]);
    assert.deepEqual(await due(now), []);
    assert.ok(await store.updatePlacedSession('ses_b', 0, { sandboxId: 'sbx_b2' }));
    assert.deepEqual(await due(now), ['ses_b'], 'a new sandbox: due at once');
    await store.scheduleMaintenance([{ id: 'ses_a', at: now + 60_000, basis: (await store.findSession('ses_a'))! }]);
    const image = { sessionId: 'ses_a', tenantId: 'tn_a', trigger: 'manual' as const, nodeId: 'node_x', createdAt: '', sizeBytes: 1, volumes: [] };
    await store.insertCheckpoint({ ...image, id: 'ckp_fs_a', kind: 'fs', pauseMs: null });
    assert.deepEqual(await due(now), ['ses_b'], 'an fs checkpoint makes nothing sooner');
    await store.insertCheckpoint({ ...image, id: 'ckp_full_a', kind: 'full', pauseMs: 200 });
    assert.deepEqual(await due(now), ['ses_a', 'ses_b'], "a full checkpoint's pause may make the next one sooner: due at once");
    const claims = (nodeIds?: string[]) => store.listSandboxClaims(nodeIds).then((c) => c.sort((x, y) => (x.sessionId < y.sessionId ? -1 : 1)));
    const [claim, ...more] = await claims(['node_z']);
    assert.deepEqual(
      [claim?.sessionId, claim?.sandboxId, claim?.nodeId, claim?.volumeNodeId, claim?.maintainAfter, more.length],
      ['ses_b', 'sbx_b2', 'node_z', 'node_z', null, 0],
    );
    await store.scheduleMaintenance([{ id: 'ses_b', at: now + 1234, basis: (await store.findSession('ses_b'))! }]);
    assert.strictEqual((await claims(['node_z']))[0]!.maintainAfter, now + 1234, 'its next maintenance, a number (a BIGINT in PostgreSQL)');
    assert.deepEqual(
      (await claims()).map((c) => c.sessionId),
      ['ses_a', 'ses_b'],
    );
    await store.updateSession('ses_b', { status: 'stopped', sandboxId: null, nodeId: null });
    assert.deepEqual(await claims(['node_z']), [], 'no sandbox: no claim');
  });

  test(named('many sessions at once: their newest checkpoint of each kind read, their next maintenance written, past 500 a statement'), async () => {
    const store = await engine.open('maintain-many');
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    const ids = Array.from({ length: 620 }, (_, i) => `ses_m${String(i).padStart(4, '0')}`);
    for (const [i, id] of ids.entries())
      await store.insertSession({ ...session(id, 'tn_a', '2026-01-01T00:00:01.000Z'), sandboxId: `sbx_${i}`, nodeId: 'node_z' });
    const image = { tenantId: 'tn_a', trigger: 'auto' as const, nodeId: 'node_z', sizeBytes: 1, volumes: [] };
    const take = (sessionId: string, id: string, kind: 'fs' | 'full', createdAt: string) =>
      store.insertCheckpoint({ ...image, sessionId, id, kind, createdAt, pauseMs: kind === 'full' ? 100 : null });
    await take('ses_m0000', 'ckp_a1', 'full', '2026-01-01T00:01:00.000Z');
    await take('ses_m0000', 'ckp_a2', 'fs', '2026-01-01T00:02:00.000Z');
    await take('ses_m0000', 'ckp_a3', 'full', '2026-01-01T00:03:00.000Z');
    await take('ses_m0000', 'ckp_a4', 'fs', '2026-01-01T00:04:00.000Z');
    await take('ses_m0000', 'ckp_a5', 'fs', '2026-01-01T00:04:00.000Z');
    await take('ses_m0619', 'ckp_b1', 'fs', '2026-01-01T00:05:00.000Z');
    await take('ses_other', 'ckp_c1', 'fs', '2026-01-01T00:05:00.000Z');
    const newest = await store.listNewestCheckpoints(ids);
    assert.deepEqual(
      [...newest].map(([id, rows]) => [id, rows.map((c) => c.id)]),
      [
        ['ses_m0000', ['ckp_a3', 'ckp_a5']],
        ['ses_m0619', ['ckp_b1']],
      ],
      'the newest full and fs ones, oldest first (of two at one time, the greater id); the 501st session read too; none of others',
    );
    assert.equal(newest.get('ses_m0000')![0]!.pauseMs, 100);

    const now = Date.parse('2026-12-01T00:00:00.000Z');
    const rows = await store.findSessions(ids);
    await store.scheduleMaintenance(rows.map((row) => ({ id: row.id, at: now + 60_000, basis: row })));
    assert.deepEqual(await store.listSessionsToMaintain(now), [], 'all 620 written');
    assert.equal((await store.listSessionsToMaintain(now + 60_000)).length, 620);
  });

  test(named("a call's one read: the session with its lease; uses of many sessions recorded in one statement"), async () => {
    const store = await engine.open('call-read');
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    const row = session('ses_c', 'tn_a', '2026-01-01T00:00:00.000Z');
    await store.insertSession(row);
    await store.insertSession(session('ses_d', 'tn_a', '2026-01-01T00:00:01.000Z'));
    assert.deepEqual(await store.getSessionWithLease('tn_a', 'ses_c'), { row, lease: null });
    assert.equal(await store.getSessionWithLease('tn_b', 'ses_c'), null, "another tenant's");
    assert.equal(await store.getSessionWithLease('tn_a', 'ses_missing'), null);
    const lease = { sessionId: 'ses_c', holder: 'cp-a/1', operation: 'restore', expiresAt: 2_500_000_000_000 };
    await store.acquireSessionLease(lease, 1_000);
    assert.deepEqual(await store.getSessionWithLease('tn_a', 'ses_c'), { row, lease });

    const at = (iso: string) => Date.parse(iso);
    await store.recordSessionsUsed(
      new Map([
        ['ses_c', at('2026-02-01T00:00:00.000Z')],
        ['ses_d', at('2026-02-02T00:00:00.000Z')],
        ['ses_gone', at('2026-02-03T00:00:00.000Z')],
      ]),
    );
    await store.recordSessionsUsed(new Map());
    const used = async (id: string) => (await store.getSession('tn_a', id))?.lastActiveAt;
    assert.deepEqual([await used('ses_c'), await used('ses_d')], ['2026-02-01T00:00:00.000Z', '2026-02-02T00:00:00.000Z']);
    // Past a statement's bound of 500 sessions: written in several.
    const many = new Map<string, number>(Array.from({ length: 1_201 }, (_, i) => [`ses_${i}`, at('2026-03-01T00:00:00.000Z')]));
    many.set('ses_d', at('2026-03-02T00:00:00.000Z'));
    await store.recordSessionsUsed(many);
    assert.equal(await used('ses_d'), '2026-03-02T00:00:00.000Z');
  });

  test(named('shipments: claimed by one holder until it expires, renewed by it, recorded only by it, and listed once abandoned'), async () => {
    const store = await engine.open('shipments');
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    await store.insertSession(session('ses_s', 'tn_a'));
    await store.insertCheckpoint(checkpoint('ckp_ship', 'ses_s', 'tn_a'));
    assert.equal(await store.claimShipment('ckp_ship', 'cp-a', 2_000, 1_000), true);
    assert.equal(await store.claimShipment('ckp_ship', 'cp-b', 2_500, 1_500), false, 'held by cp-a');
    assert.equal(await store.claimShipment('ckp_ship', 'cp-a', 3_000, 1_900), true, 'renewed by its holder');
    assert.deepEqual(await store.listAbandonedShipments(2_900), []);
    assert.deepEqual(
      (await store.listAbandonedShipments(3_001)).map((c) => c.id),
      ['ckp_ship'],
      'abandoned once expired',
    );
    assert.equal(await store.claimShipment('ckp_ship', 'cp-b', 20_000, 3_001), true, 'taken over');
    const shipped = { at: new Date().toISOString(), baseId: 'bse_1', objects: [] };
    assert.equal(await store.markShipped('ckp_ship', 'cp-a', shipped), false, 'the old holder records nothing');
    assert.equal(await store.markShipped('ckp_ship', 'cp-b', shipped), true);
    assert.equal(await store.claimShipment('ckp_ship', 'cp-c', 30_000, 25_000), false, 'a shipped checkpoint is not claimed');
    assert.deepEqual(await store.listAbandonedShipments(Number.MAX_SAFE_INTEGER), []);
    await store.insertCheckpoint(checkpoint('ckp_ship2', 'ses_s', 'tn_a'));
    assert.equal(await store.claimShipment('ckp_ship2', 'cp-a', 2_000, 1_000), true);
    await store.releaseShipment('ckp_ship2', 'cp-b');
    assert.equal(await store.claimShipment('ckp_ship2', 'cp-b', 2_000, 1_000), false, 'released only by its holder');
    await store.releaseShipment('ckp_ship2', 'cp-a');
    assert.equal(await store.claimShipment('ckp_ship2', 'cp-b', 2_000, 1_000), true);
  });

  test(named('checkpoints: memory-image bytes per tenant, fork parents and children'), async () => {
    const store = await engine.open('checkpoints');
    await store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    await store.insertSession(session('ses_p', 'tn_a'));
    await store.insertCheckpoint(checkpoint('ckp_fs', 'ses_p', 'tn_a'));
    // Beyond 2^32: byte counts are 64-bit on both engines.
    await store.insertCheckpoint(checkpoint('ckp_full', 'ses_p', 'tn_a', 5_000_000_000));
    await store.insertCheckpoint(checkpoint('ckp_full2', 'ses_p', 'tn_a', 1_000));
    assert.equal(await store.checkpointBytes('tn_a'), 5_000_001_000);
    assert.equal(await store.checkpointBytes('tn_none'), 0);
    await store.deleteCheckpoint('ckp_full2');
    assert.equal(await store.checkpointBytes('tn_a'), 5_000_000_000, 'the sum follows deletes');
    await store.insertCheckpoint(checkpoint('ckp_full2', 'ses_p', 'tn_a', 1_000));
    assert.equal((await store.getCheckpoint('tn_a', 'ckp_full'))?.sizeBytes, 5_000_000_000);
    assert.equal(await store.getCheckpoint('tn_b', 'ckp_full'), null);
    assert.deepEqual([...(await store.knownCheckpoints(['ckp_fs', 'ckp_none']))], ['ckp_fs']);
    await store.insertSession({ ...session('ses_c', 'tn_a'), parentCheckpointId: 'ckp_full' });
    assert.equal(await store.isForkParent('ckp_full'), true);
    assert.equal(await store.isForkParent('ckp_fs'), false);
    assert.deepEqual(
      (await store.listChildren('ses_p')).map((s) => s.id),
      ['ses_c'],
    );
    await store.deleteCheckpoint('ckp_full2');
    assert.deepEqual((await store.listCheckpoints('ses_p')).map((c) => c.id).sort(), ['ckp_fs', 'ckp_full']);
  });

  test(named('secrets are per tenant; an update keeps the placeholder and creation time; sessions keep their egress policy'), async () => {
    const store = await engine.open('secrets');
    for (const id of ['tn_aaaaaa', 'tn_bbbbbb']) await store.insertTenant({ id, name: id, createdAt: new Date().toISOString() });
    const first = await store.putSecret({
      tenantId: 'tn_aaaaaa',
      name: 'TOKEN',
      value: 'v1',
      hosts: ['api.example.com'],
      placeholder: 'P1',
      createdAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-01T00:00:00.000Z',
    });
    const second = await store.putSecret({
      tenantId: 'tn_aaaaaa',
      name: 'TOKEN',
      value: 'v2',
      hosts: ['*.example.com'],
      placeholder: 'P2',
      createdAt: '2026-02-01T00:00:00.000Z',
      updatedAt: '2026-02-01T00:00:00.000Z',
    });
    assert.equal(first.value, 'v1');
    assert.deepEqual(
      { value: second.value, hosts: second.hosts, placeholder: second.placeholder, createdAt: second.createdAt },
      { value: 'v2', hosts: ['*.example.com'], placeholder: 'P1', createdAt: '2026-01-01T00:00:00.000Z' },
    );
    assert.equal(await store.getSecret('tn_bbbbbb', 'TOKEN'), null);
    assert.deepEqual(await store.listSecrets('tn_bbbbbb'), []);
    assert.equal(await store.deleteSecret('tn_bbbbbb', 'TOKEN'), false);
    assert.equal(await store.deleteSecret('tn_aaaaaa', 'TOKEN'), true);
    assert.equal(await store.getSecret('tn_aaaaaa', 'TOKEN'), null);
    await store.insertSession(session('ses_egress1', 'tn_aaaaaa'));
    await store.setSessionEgress('ses_egress1', { mode: 'deny-all', domains: [], cidrs: [] });
    const row = (await store.getSession('tn_aaaaaa', 'ses_egress1'))!;
    assert.deepEqual(
      { secrets: row.secrets, egress: row.egress },
      { secrets: [{ name: 'TOKEN', secret: 'TOKEN' }], egress: { mode: 'deny-all', domains: [], cidrs: [] } },
    );
    // A session's grants: written only over those read; a rebound name keeps its placeholder.
    const rebound = [
      { name: 'TOKEN', secret: 'TOKEN_RO', placeholder: 'P1' },
      { name: 'OTHER', secret: 'OTHER' },
    ];
    assert.equal(await store.setSessionSecrets('ses_egress1', [], rebound), false, 'not what it holds');
    assert.equal(await store.setSessionSecrets('ses_egress1', row.secrets, rebound), true);
    assert.deepEqual((await store.getSession('tn_aaaaaa', 'ses_egress1'))!.secrets, rebound);
    assert.equal(await store.setSessionSecrets('ses_egress1', row.secrets, []), false, 'changed since');
    assert.equal(await store.setSessionSecrets('ses_egress1', rebound, []), true);
    assert.deepEqual((await store.getSession('tn_aaaaaa', 'ses_egress1'))!.secrets, []);
  });

  test(named('a lease is held by one holder until it expires or is released; only its holder renews it'), async () => {
    const [a, b] = [await engine.open('leases'), await engine.open('leases')];
    const lease = (holder: string, expiresAt: number) => ({ sessionId: 'ses_l', holder, operation: 'restore', expiresAt });
    assert.equal(await a.acquireSessionLease(lease('a-1', 2_000_000_000_000), 1_000), true);
    assert.equal(await b.acquireSessionLease(lease('b-1', 2_000_000_000_000), 1_000), false, 'held');
    assert.equal(await b.renewSessionLease('ses_l', 'b-1', 3_000_000_000_000), false, 'not its holder');
    assert.equal(await a.renewSessionLease('ses_l', 'a-1', 2_500_000_000_000), true);
    assert.deepEqual(await b.getSessionLease('ses_l'), lease('a-1', 2_500_000_000_000), 'ms timestamps beyond 2^32 come back as numbers');
    assert.equal(await b.acquireSessionLease(lease('b-2', 3_000_000_000_000), 2_500_000_000_000), true, 'expired: taken over');
    await a.releaseSessionLease('ses_l', 'a-1');
    assert.equal((await a.getSessionLease('ses_l'))?.holder, 'b-2', 'a former holder cannot release it');
    await b.releaseSessionLease('ses_l', 'b-2');
    assert.equal(await a.getSessionLease('ses_l'), null);
  });

  test(named('template versions made at once by two control planes are consecutive'), async () => {
    const [a, b] = [await engine.open('templates'), await engine.open('templates')];
    await a.insertTenant({ id: 'tn_t', name: 't', createdAt: '' });
    const made = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        (i % 2 ? a : b).insertTemplateVersion({
          id: `tpl_${i}`,
          tenantId: 'tn_t',
          name: 'py',
          fromCheckpoint: 'ckp_x',
          nodeId: 'node_x',
          createdAt: '',
          config: null,
        }),
      ),
    );
    assert.deepEqual(
      made.map((t) => t.version).sort((x, y) => x - y),
      Array.from({ length: 12 }, (_, i) => i + 1),
    );
    assert.equal(
      (
        await a.insertTemplateVersion({
          id: 'tpl_other',
          tenantId: 'tn_t',
          name: 'node',
          fromCheckpoint: 'ckp_x',
          nodeId: 'node_x',
          createdAt: '',
          config: null,
        })
      ).version,
      1,
    );
    await a.deleteTemplate('tpl_0');
    assert.equal((await b.listTemplates('tn_t')).length, 12);
  });

  test(named('volumes: names unique per tenant, one read-write mount at a time across control planes, snapshots go with their volume'), async () => {
    const [a, b] = [await engine.open('volumes'), await engine.open('volumes')];
    await a.insertTenant({ id: 'tn_v', name: 'v', createdAt: '' });
    const volume = { id: 'vol_1', tenantId: 'tn_v', name: 'data', nodeId: 'node_x', sizeGb: 0.25, createdAt: '', fromSnapshot: null, ownerSessionId: null };
    assert.equal(await a.insertVolume(volume), true);
    assert.equal(await b.insertVolume({ ...volume, id: 'vol_2' }), false, 'the name is taken');
    assert.deepEqual(await b.getVolume('tn_v', 'data'), volume);
    assert.equal(await b.getVolume('tn_other', 'data'), null);
    // Eight sessions race for the one read-write mount through two stores: exactly one gets it, readers always do.
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).claimVolumeMounts([{ sessionId: `ses_w${i}`, volumeId: 'vol_1', path: '/data', readOnly: false }])),
    );
    assert.equal(claims.filter((busy) => busy === null).length, 1);
    assert.ok(claims.every((busy) => busy === null || busy === 'vol_1'));
    assert.equal(await a.claimVolumeMounts([{ sessionId: 'ses_r', volumeId: 'vol_1', path: '/ro', readOnly: true }]), null);
    assert.equal((await b.listVolumeMounts('vol_1')).length, 2);
    // A refused claim records none of its mounts.
    await a.insertVolume({ ...volume, id: 'vol_3', name: 'other' });
    const partial = [
      { sessionId: 'ses_x', volumeId: 'vol_3', path: '/other', readOnly: false },
      { sessionId: 'ses_x', volumeId: 'vol_1', path: '/data', readOnly: false },
    ];
    assert.equal(await a.claimVolumeMounts(partial), 'vol_1');
    assert.deepEqual(await a.listVolumeMounts('vol_3'), []);
    // Deleting the writer's session frees the volume for the next writer.
    const writer = (await a.listVolumeMounts('vol_1')).find((m) => !m.readOnly)!.sessionId;
    await a.deleteSession(writer);
    assert.equal(await b.claimVolumeMounts([{ sessionId: 'ses_next', volumeId: 'vol_1', path: '/data', readOnly: false }]), null);
    await a.insertVolumeSnapshot({ id: 'vsn_1', tenantId: 'tn_v', volumeId: 'vol_1', nodeId: 'node_x', createdAt: '' });
    assert.equal((await b.getVolumeSnapshot('tn_v', 'vsn_1'))?.volumeId, 'vol_1');
    assert.equal(await b.getVolumeSnapshot('tn_other', 'vsn_1'), null);
    await a.deleteVolume('vol_1');
    assert.deepEqual(await b.listVolumeSnapshots('vol_1'), []);
    assert.deepEqual(
      (await b.listVolumes('tn_v')).map((v) => v.name),
      ['other'],
    );
  });

  test(named('the schema is migrated once, also when two control planes open a new database at once'), async () => {
    // PostgreSQL: at once, serialized by an advisory lock. SQLite: its write lock serializes processes,
    // but two connections in one thread would wait on each other, so they open one after the other.
    const [a, b] =
      engine.name === 'postgres'
        ? await Promise.all([engine.open('migrate'), engine.open('migrate')])
        : [await engine.open('migrate'), await engine.open('migrate')];
    await a.insertTenant({ id: 'tn_m', name: 'm', createdAt: '' });
    assert.equal((await b.getTenant('tn_m'))?.name, 'm');
    const versions =
      engine.name === 'sqlite'
        ? new Database(await engine.location('migrate')).prepare('SELECT version FROM schema_migrations').all()
        : await (async () => {
            const db = await PostgresDatabase.open(await engine.location('migrate'));
            try {
              return await db.all('SELECT version FROM schema_migrations');
            } finally {
              await db.close();
            }
          })();
    assert.deepEqual(
      versions.map((v) => Number((v as { version: number }).version)),
      migrations.map((m) => m.version),
    );
  });
}

test('postgres: calls while the server is down fail with STORE_UNAVAILABLE, and work again once it is back', async () => {
  const store = await engines.postgres.open('outage');
  await store.insertTenant({ id: 'tn_o', name: 'o', createdAt: '' });
  const server = await engines.postgres.server();
  // Down for a second: calls in that second fail cleanly rather than hang.
  const restarting = server.restart(1000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const during = await store.getTenant('tn_o').then(
    () => 'answered',
    (err: { code?: string; message?: string }) => `${err.code}: ${err.message}`,
  );
  await restarting;
  assert.match(during, /^STORE_UNAVAILABLE: the database \(SPACE_DATABASE_URL\) is unreachable/);
  assert.equal((await store.getTenant('tn_o'))?.name, 'o', 'the pool reconnects by itself');
  await store.insertTenant({ id: 'tn_o2', name: 'o2', createdAt: '' });
  assert.equal((await store.getTenant('tn_o2'))?.name, 'o2');
});

test('a database that cannot be reached or is not PostgreSQL is refused at start, naming the setting', async () => {
  await assert.rejects(openStore({ databaseUrl: 'mysql://x', dataDir: '/nonexistent' }), /SPACE_DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL/);
  // Port 9 (discard) on loopback: nothing listens.
  await assert.rejects(openStore({ databaseUrl: 'postgres://postgres@127.0.0.1:9/space', dataDir: '/nonexistent' }), /SPACE_DATABASE_URL.*ECONNREFUSED/);
});

test('sqlite: a file from before versioned migrations is brought up to date and keeps its rows', async () => {
  const file = await engines.sqlite.location('legacy');
  // The first release's tables, before any column was added.
  const old = new Database(file);
  old.exec(`
    CREATE TABLE tenants (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE api_keys (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id), hash TEXT NOT NULL UNIQUE, admin INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
    CREATE TABLE sessions (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id), template TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL, env TEXT NOT NULL, resources TEXT NOT NULL, metadata TEXT NOT NULL, sandbox_id TEXT, node_id TEXT, sandbox_started_at TEXT);
    CREATE TABLE checkpoints (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, tenant_id TEXT NOT NULL, kind TEXT NOT NULL, trigger TEXT NOT NULL, node_id TEXT NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE sandbox_history (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, node_id TEXT NOT NULL, started_at TEXT NOT NULL, ended_at TEXT, end_reason TEXT);
    INSERT INTO tenants VALUES ('tn_old', 'old', '2026-01-01');
    INSERT INTO sessions VALUES ('ses_old', 'tn_old', 'base', 'stopped', '2026-01-01', '{}', '{"memoryMb":512,"cpus":1,"pids":256}', '{}', NULL, NULL, NULL);
  `);
  old.close();
  const store = await openSqliteStore(file);
  try {
    const row = await store.getSession('tn_old', 'ses_old');
    assert.deepEqual([row?.onResume, row?.egress.mode, row?.checkpointIntervalSec, row?.secrets], ['processes', 'allow-all', 60, []]);
    assert.equal(await store.countSessions('tn_old'), 1, 'the tenant counts start from the rows there were');
    assert.deepEqual(await store.countSessionsByStatus(), { stopped: 1 }, 'and so do the counts by status');
    await store.insertTemplateVersion({ id: 'tpl_new', tenantId: 'tn_old', name: 't', fromCheckpoint: 'ckp', nodeId: null, createdAt: '', config: null });
  } finally {
    await store.close();
  }
});
