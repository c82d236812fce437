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
  id,
  tenantId,
  template: 'tiny',
  status: 'running',
  createdAt: new Date().toISOString(),
  env: { A: '1' },
  resources: { memoryMb: 512, cpus: 1, pids: 256 },
  metadata: { k: 'v' },
  sandboxId: 'sbx_x',
  nodeId: 'node_x',
  sandboxStartedAt: new Date().toISOString(),
  parentCheckpointId: null,
  checkpointIntervalSec: 60,
  fullCheckpointIntervalSec: 600,
  onResume: 'files',
  resumeNote: null,
  idleTimeoutSec: 900,
  secrets: ['TOKEN'],
  egress: { mode: 'allow-list', domains: ['*.example.com'], cidrs: [] },
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

test('secrets are per tenant; an update keeps the placeholder and creation time; sessions keep their egress policy', () => {
  withStore((store) => {
    for (const id of ['tn_aaaaaa', 'tn_bbbbbb']) store.insertTenant({ id, name: id, createdAt: new Date().toISOString() });
    const first = store.putSecret({
      tenantId: 'tn_aaaaaa',
      name: 'TOKEN',
      value: 'v1',
      hosts: ['api.example.com'],
      placeholder: 'P1',
      createdAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-01T00:00:00.000Z',
    });
    const second = store.putSecret({
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
    assert.equal(store.getSecret('tn_bbbbbb', 'TOKEN'), null);
    assert.deepEqual(store.listSecrets('tn_bbbbbb'), []);
    assert.equal(store.deleteSecret('tn_bbbbbb', 'TOKEN'), false);
    assert.equal(store.deleteSecret('tn_aaaaaa', 'TOKEN'), true);
    assert.equal(store.getSecret('tn_aaaaaa', 'TOKEN'), null);
    store.insertSession(session('ses_egress1', 'tn_aaaaaa'));
    store.setSessionEgress('ses_egress1', { mode: 'deny-all', domains: [], cidrs: [] });
    const row = store.getSession('tn_aaaaaa', 'ses_egress1')!;
    assert.deepEqual({ secrets: row.secrets, egress: row.egress }, { secrets: ['TOKEN'], egress: { mode: 'deny-all', domains: [], cidrs: [] } });
  });
});
