import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { Authenticator, adminTenantId, hashKey } from './auth.js';
import { SqliteStore } from './store/sqlite-store.js';
import type { SessionRow } from './store/store.js';

function withStore(run: (store: SqliteStore, file: string) => void): void {
  const dir = mkdtempSync(path.join(tmpdir(), 'space-store-'));
  const file = path.join(dir, 'space.db');
  const store = new SqliteStore(file);
  try {
    run(store, file);
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const session = (id: string, tenantId: string): SessionRow => ({
  id, tenantId, template: 'tiny', status: 'running', createdAt: new Date().toISOString(), env: { A: '1' },
  resources: { memoryMb: 512, cpus: 1, pids: 256 }, metadata: { k: 'v' }, sandboxId: 'sbx_x', nodeId: 'node_x', sandboxStartedAt: new Date().toISOString(), parentCheckpointId: null, checkpointIntervalSec: 60, fullCheckpointIntervalSec: 600, idleTimeoutSec: 900,
});

test('keys are stored hashed and resolve to their tenant', () => {
  withStore((store) => {
    const auth = new Authenticator(store);
    auth.installAdminKey('admin-secret');
    store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    const { key } = auth.createKey('tn_a');
    assert.equal(store.findApiKey(key), null, 'the raw key must not be stored');
    assert.equal(store.findApiKey(hashKey(key))?.tenantId, 'tn_a');
    assert.equal(store.findApiKey(hashKey('admin-secret'))?.tenantId, adminTenantId);
    assert.throws(() => auth.createKey('tn_missing'), { code: 'TENANT_NOT_FOUND' });
  });
});

test('a new configured admin key replaces the old one', () => {
  withStore((store) => {
    const auth = new Authenticator(store);
    auth.installAdminKey('first');
    auth.installAdminKey('second');
    auth.installAdminKey('second');
    assert.equal(store.findApiKey(hashKey('first')), null);
    assert.equal(store.findApiKey(hashKey('second'))?.admin, true);
  });
});

test('sessions are scoped by tenant and survive reopening the file', () => {
  withStore((store, file) => {
    store.insertTenant({ id: 'tn_a', name: 'a', createdAt: '' });
    store.insertTenant({ id: 'tn_b', name: 'b', createdAt: '' });
    store.insertSession(session('ses_1', 'tn_a'));
    assert.equal(store.getSession('tn_b', 'ses_1'), null);
    assert.deepEqual(store.listSessions('tn_b'), []);
    store.updateSession('ses_1', { status: 'stopped', sandboxId: null });
    const reopened = new SqliteStore(file);
    const row = reopened.getSession('tn_a', 'ses_1');
    reopened.close();
    assert.equal(row?.status, 'stopped');
    assert.equal(row?.sandboxId, null);
    assert.deepEqual(row?.resources, { memoryMb: 512, cpus: 1, pids: 256 });
    store.deleteSession('ses_1');
    assert.equal(store.getSession('tn_a', 'ses_1'), null);
  });
});
