import { randomBytes } from 'node:crypto';
import { CreateSessionRequestSchema } from '@space/protocol';
import type { Caller } from '../tenants/auth.js';
import { SecretCipher } from '../store/secret-cipher.js';
import { openSqliteStore } from '../store/open-store.js';
import type { Store } from '../store/store.js';
import { FakeNode } from './fake-node.js';
import { type ControlPlaneSettings, defaultControlPlaneSettings } from '../settings.js';
import { wireServices } from '../service-graph.js';

/**
 * The control plane's services wired as in ControlPlane (`wireServices`), with default settings
 * but `changes`, on an in-memory store (or `given`) and a FakeNode, with a settable clock. No
 * object store: nothing is shipped (the shipping itself is tested on real btrfs and an S3 server);
 * builds run sandboxes through the public API, so they are tested end to end, not here.
 */
export async function servicesOnFakeNode(changes: Partial<ControlPlaneSettings> = {}, given?: Store) {
  const clock = { now: Date.now() };
  const store = given ?? (await openSqliteStore(':memory:'));
  await store.insertTenant({ id: 'tn_test0001', name: 'test', createdAt: new Date().toISOString() });
  const caller: Caller = { tenantId: 'tn_test0001', admin: false };
  const node = new FakeNode(() => clock.now);
  const log: string[] = [];
  const services = wireServices({
    store,
    secrets: new SecretCipher(randomBytes(32)),
    settings: defaultControlPlaneSettings(changes),
    log: (m) => log.push(m),
    apiUrl: () => 'http://fake-api.invalid',
    seat: '',
    now: () => clock.now,
    connect: () => node.asClient(),
    lifecyclePollMs: 5,
    writeWindowMs: 0,
  });
  const { nodes, sessions } = services;
  // Registered like a real node, on the real clock (the test clock jumps ahead, which would make it lost).
  nodes.setConfiguredNode(node.nodeId);
  await nodes.heartbeat({ id: node.nodeId, url: 'https://fake-node.invalid', token: 'fake-node-token-0', capacity: { memoryMb: 4096, cpus: 2 }, sandboxes: 0 });
  const create = (fields: Record<string, unknown> = {}) => sessions.create(caller, CreateSessionRequestSchema.parse({ template: 'tiny', ...fields }));
  return { ...services, clock, store, caller, node, log, create };
}
