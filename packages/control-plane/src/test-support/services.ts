import { randomBytes } from 'node:crypto';
import { CreateSessionRequestSchema } from '@space/protocol';
import { Activity, recordActivityIn } from '../sessions/activity.js';
import type { Caller } from '../tenants/auth.js';
import { CheckpointTaker } from '../checkpoints/checkpoint-taker.js';
import { EgressService } from '../tenants/egress-service.js';
import { LifecycleQueue } from '../sessions/lifecycle-queue.js';
import { Maintenance } from '../maintenance/maintenance.js';
import { Metrics } from '../metrics/metrics.js';
import { SecretCipher } from '../store/secret-cipher.js';
import { SessionCheckpointService } from '../sessions/session-checkpoint-service.js';
import { SessionCalls } from '../sessions/session-calls.js';
import { SessionService } from '../sessions/session-service.js';
import { SessionPauser } from '../sessions/session-pauser.js';
import { openSqliteStore } from '../store/open-store.js';
import type { Store } from '../store/store.js';
import { FakeNode } from './fake-node.js';
import { CheckpointShipper } from '../checkpoints/checkpoint-shipper.js';
import { SessionMover } from '../sessions/session-mover.js';
import { NodeDirectory } from '../cluster/node-directory.js';
import { NodeDrain } from '../sessions/node-drain.js';
import { Authenticator } from '../tenants/auth.js';
import { TenantLimits, defaultTenantLimits, type TenantLimitOptions } from '../tenants/tenant-limits.js';
import { VolumeService } from '../sessions/volume-service.js';
import { TemplateBuilds } from '../builds/template-builds.js';
import { TemplateCatalog } from '../templates/template-catalog.js';
import { TemplateService } from '../builds/template-service.js';

/** The control plane's services wired as in ControlPlane, on an in-memory store (or `given`) and a FakeNode, with a settable clock. */
export async function servicesOnFakeNode(limitOptions: Partial<TenantLimitOptions> = {}, given?: Store) {
  const clock = { now: Date.now() };
  const now = (): number => clock.now;
  const store = given ?? (await openSqliteStore(':memory:'));
  await store.insertTenant({ id: 'tn_test0001', name: 'test', createdAt: new Date().toISOString() });
  const caller: Caller = { tenantId: 'tn_test0001', admin: false };
  const node = new FakeNode();
  const metrics = new Metrics();
  const log: string[] = [];
  const activity = new Activity(now, recordActivityIn(store));
  const lifecycle = new LifecycleQueue(store, (m) => log.push(m), { pollMs: 5 });
  const cipher = new SecretCipher(randomBytes(32));
  // Registered like a real node, on the real clock (the test clock jumps ahead, which would make it lost).
  const nodes = new NodeDirectory({ store, cipher, lostAfterMs: 10_000, connect: () => node.asClient() });
  nodes.setConfiguredNode(node.nodeId);
  await nodes.heartbeat({ id: node.nodeId, url: 'http://fake-node.invalid', token: 'fake-node-token-0', capacity: { memoryMb: 4096, cpus: 2 }, sandboxes: 0 });
  // No object store: nothing is shipped (the shipping itself is tested on real btrfs and an S3 server).
  const shipper = new CheckpointShipper({ store, nodes, metrics, log: (m) => log.push(m), enabled: false });
  const taker = new CheckpointTaker(store, nodes, metrics, shipper);
  const mover = new SessionMover({ store, nodes, shipper, taker, metrics, log: (m) => log.push(m) });
  const egress = new EgressService(store, nodes, cipher, (m) => log.push(m));
  const auth = new Authenticator(store);
  const limits = new TenantLimits(auth, store, metrics, { ...defaultTenantLimits, ...limitOptions }, now);
  const catalog = new TemplateCatalog(store);
  const volumes = new VolumeService(store, nodes);
  const sessions = new SessionService({
    store,
    nodes,
    metrics,
    taker,
    activity,
    egress,
    lifecycle,
    limits,
    templates: catalog,
    shipper,
    mover,
    volumes,
    defaultDiskGb: 10,
  });
  const drain = new NodeDrain({ store, nodes, lifecycle, mover, sessions, log: (m) => log.push(m) });
  const calls = new SessionCalls(store, sessions, lifecycle, activity);
  const checkpoints = new SessionCheckpointService(store, nodes, sessions, taker, metrics, limits, shipper, volumes);
  const templates = new TemplateService(store, nodes, checkpoints, catalog);
  // Builds run sandboxes through the public API: tested end to end, not on the fake node.
  const builds = new TemplateBuilds(
    { store, sessions, checkpoints, templates, catalog, auth, apiUrl: () => 'http://fake-api.invalid', log: (m) => log.push(m) },
    { maxContextBytes: 1024 * 1024, cacheEntries: 4 },
  );
  const pauser = new SessionPauser({ store, nodes, sessions, checkpoints, metrics, keepAutomatic: 5, now });
  const maintenance = new Maintenance({
    store,
    taker,
    nodes,
    shipper,
    sessions,
    checkpoints,
    pauser,
    activity,
    lifecycle,
    egress,
    builds,
    metrics,
    log: (m) => log.push(m),
    keepAutomatic: 5,
    fullCheckpointPauseShare: 0.02,
    now,
  });
  const create = (fields: Record<string, unknown> = {}) => sessions.create(caller, CreateSessionRequestSchema.parse({ template: 'tiny', ...fields }));
  return {
    clock,
    store,
    nodes,
    drain,
    caller,
    node,
    metrics,
    log,
    activity,
    lifecycle,
    auth,
    egress,
    limits,
    catalog,
    templates,
    builds,
    volumes,
    sessions,
    calls,
    checkpoints,
    pauser,
    maintenance,
    create,
  };
}
