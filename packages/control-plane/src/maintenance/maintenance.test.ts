import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Activity, recordActivityIn } from '../sessions/activity.js';
import { openSqliteStore } from '../store/open-store.js';
import type { MaintenanceSchedule } from '../store/store.js';
import { servicesOnFakeNode } from '../test-support/services.js';

const counter = (text: string, name: string): number => Number(/^(\S+) (\d+)$/m.exec(text.split('\n').find((l) => l.startsWith(`${name} `)) ?? '')?.[2] ?? NaN);

test('a session whose sandbox the node no longer runs is marked stopped once, and nothing acts on the gone sandbox', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 1, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  s.node.killBehindTheScenes(session.sandbox!.id);
  for (let i = 0; i < 5; i++) {
    s.clock.now += 5000;
    await s.maintenance.tick();
  }
  const after = await s.sessions.get(s.caller, session.id);
  assert.deepEqual([after.status, after.sandbox, after.sandboxHistory!.at(-1)!.endReason], ['stopped', null, 'lost']);
  assert.equal((await s.store.listCheckpoints(session.id)).length, 0, 'no checkpoint of a session without a sandbox');
  assert.equal(counter(s.metrics.render({}), 'space_sessions_reconciled_total'), 1);
  assert.equal(counter(s.metrics.render({}), 'space_sandbox_deaths_total'), 1, 'a lost sandbox counts as a death');
});

test('a session a crash left "starting" is marked stopped, and reconcileAll does it before anything else', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  await s.store.updateSession(session.id, { status: 'starting', sandboxId: null, nodeId: null, sandboxStartedAt: null });
  await s.maintenance.reconcileAll();
  assert.equal((await s.sessions.get(s.caller, session.id)).status, 'stopped');
});

test('a pass is not held up by the slow sweeps: a session due gets its checkpoint while a sweep waits on a node', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 1, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  let release = () => {};
  s.node.checkpointListHeld = new Promise<void>((resolve) => (release = resolve));
  s.clock.now += 2000;
  const tick = s.maintenance.tick();
  const deadline = Date.now() + 10_000;
  while ((await s.store.listCheckpoints(session.id)).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.equal((await s.store.listCheckpoints(session.id)).length, 1, "the pass took the checkpoint while the sweep's node held it");
  release();
  await tick;
});

test('automatic fs checkpoints are taken only of a volume that changed since the newest one', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 1, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const count = async () => (await s.store.listCheckpoints(session.id)).length;
  s.clock.now += 2000;
  await s.maintenance.tick();
  assert.equal(await count(), 1, 'the first one: nothing was saved yet');
  for (let i = 0; i < 3; i++) {
    s.clock.now += 2000;
    await s.maintenance.tick();
  }
  assert.equal(await count(), 1, 'unchanged: none');
  assert.equal(counter(s.metrics.render({}), 'space_checkpoints_skipped_unchanged_total'), 3);
  s.node.changed.add(session.id);
  s.clock.now += 2000;
  await s.maintenance.tick();
  assert.equal(await count(), 2, 'after a write: one');
});

test('a sandbox its node lists quiet since the newest checkpoint is not asked about (neither its volume nor its processes) nor looked at again until it is written', async () => {
  const s = await servicesOnFakeNode();
  s.node.tracksQuiet = true;
  const session = await s.create({ checkpointIntervalSec: 1, fullCheckpointIntervalSec: 3, idleTimeoutSec: 0 });
  const count = async () => (await s.store.listCheckpoints(session.id)).length;
  s.clock.now += 2000;
  await s.maintenance.tick();
  assert.equal(await count(), 1, 'the first one: nothing was saved yet');
  const askedBefore = s.node.asked.length;
  for (let i = 0; i < 4; i++) {
    s.clock.now += 2000;
    await s.maintenance.tick();
  }
  assert.equal(await count(), 1, 'quiet: none');
  assert.deepEqual(s.node.asked.slice(askedBefore), [], 'the node was not asked (its full checkpoint came due too: no process can run)');
  const metrics = s.metrics.render({});
  assert.equal(counter(metrics, 'space_checkpoints_skipped_quiet_total'), 1, 'looked at once, then left until something comes in');
  assert.equal(counter(metrics, 'space_checkpoints_skipped_unchanged_total'), 1);
  s.node.write(session.id);
  s.clock.now += 2000;
  await s.maintenance.tick();
  assert.equal(await count(), 2, 'the pass after a write: one, the node asked');
  assert.ok(s.node.asked.slice(askedBefore).includes(`changed ${session.id}`));
});

test('a sandbox listed quiet since an older checkpoint than the newest is asked as any other', async () => {
  const s = await servicesOnFakeNode();
  s.node.tracksQuiet = true;
  const session = await s.create({ checkpointIntervalSec: 1, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  s.clock.now += 2000;
  await s.maintenance.tick();
  const [first] = await s.store.listCheckpoints(session.id);
  // A checkpoint the node's list does not know of yet (taken through another control plane as the list was read).
  await s.checkpoints.create(s.caller, session.id);
  s.node.sandboxes.get(session.sandbox!.id)!.quietSince = first!.id;
  const askedBefore = s.node.asked.length;
  s.clock.now += 2000;
  await s.maintenance.tick();
  assert.deepEqual(s.node.asked.slice(askedBefore), [`changed ${session.id}`]);
});

test('a session in use all along (a stream open through every pass) still gets its automatic checkpoints', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 1, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const ended = s.calls.trackStream(session.id);
  try {
    for (let i = 0; i < 3; i++) {
      s.node.changed.add(session.id);
      s.clock.now += 2000;
      await s.maintenance.tick();
    }
    assert.equal((await s.store.listCheckpoints(session.id)).length, 3, 'one per interval, with its writes');
    assert.equal((await s.sessions.get(s.caller, session.id)).status, 'running', 'in use: not stopped as idle');
  } finally {
    ended();
  }
});

test('a session busy with its own lifecycle operation is skipped, without waiting for it', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 1, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  let release!: () => void;
  const restoring = s.lifecycle.run(session.id, 'restore', () => new Promise<void>((r) => (release = r)));
  s.clock.now += 5000;
  const started = Date.now();
  await s.maintenance.tick();
  assert.ok(Date.now() - started < 1000);
  assert.equal((await s.store.listCheckpoints(session.id)).length, 0);
  release();
  await restoring;
  await s.maintenance.tick();
  assert.equal((await s.store.listCheckpoints(session.id)).length, 1, 'taken on the next pass');
});

test('an idle session gets a full checkpoint and its sandbox is stopped; it shows "idle"', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 1 });
  s.clock.now += 2000;
  await s.maintenance.tick();
  const after = await s.sessions.get(s.caller, session.id);
  assert.deepEqual([after.status, after.sandbox, after.sandboxHistory!.at(-1)!.endReason], ['idle', null, 'idle']);
  assert.deepEqual(s.node.calls.slice(-2), [`checkpoint full ${session.id}`, `stop ${session.sandbox!.id}`]);
});

test('a session in use through another control plane is not idle here, also while a long call stays open there', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 1 });
  const elsewhere = new Activity(() => s.clock.now, recordActivityIn(s.store));
  const status = async () => (await s.sessions.get(s.caller, session.id)).status;
  s.clock.now += 2000;
  const endCall = elsewhere.begin(session.id);
  await elsewhere.flush();
  await s.maintenance.tick();
  assert.equal(await status(), 'running', 'used there just now');
  // The call stays open for long: that control plane's maintenance records it on every pass.
  s.clock.now += 2000;
  await elsewhere.recordOpenCalls();
  await s.maintenance.tick();
  assert.equal(await status(), 'running', 'a call is still open there');
  endCall();
  s.clock.now += 5000;
  await s.maintenance.tick();
  assert.equal(await status(), 'idle');
});

test('automatic full checkpoints are taken while processes run, and not while none does', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 10, idleTimeoutSec: 0 });
  const kinds = async () => (await s.store.listCheckpoints(session.id)).map((c) => c.kind);
  for (let i = 0; i < 3; i++) {
    s.clock.now += 11_000;
    await s.maintenance.tick();
  }
  assert.deepEqual(await kinds(), [], 'no process runs: no full checkpoint');
  s.node.runningProcesses = true;
  s.clock.now += 11_000;
  await s.maintenance.tick();
  assert.deepEqual(await kinds(), ['full']);
  s.clock.now += 5_000;
  await s.maintenance.tick();
  assert.deepEqual(await kinds(), ['full'], 'not before the interval');
  s.clock.now += 6_000;
  await s.maintenance.tick();
  assert.deepEqual(await kinds(), ['full', 'full']);
});

test('while the volume is written, full checkpoints come as often as their pause allows (2% of the time, not under 10 s), a write seen at the next look; unwritten, at the interval', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 60, idleTimeoutSec: 0 });
  const fulls = async () => (await s.store.listCheckpoints(session.id)).filter((c) => c.kind === 'full').length;
  const after = async (ms: number, written: boolean) => {
    if (written) s.node.changed.add(session.id);
    s.clock.now += ms;
    await s.maintenance.tick();
    return fulls();
  };
  s.node.runningProcesses = true;
  s.node.fullPauseMs = 100;
  assert.equal(await after(61_000, false), 1, 'the first at the interval: no pause was measured yet');
  assert.equal(await after(11_000, false), 1, 'nothing written: not before the interval');
  // Looked at 72 s (unchanged): the next look is due a busy interval later, at 82 s.
  assert.equal(await after(1_000, true), 1, 'written at 73 s: caught by the next look');
  assert.equal(await after(9_000, true), 2, 'written: 100 ms / 2% is 5 s, so after 10 s');
  assert.equal(await after(5_000, true), 2, 'never under 10 s');
  s.node.fullPauseMs = 800;
  assert.equal(await after(6_000, true), 3);
  assert.equal(await after(30_000, true), 3, '800 ms / 2% is 40 s');
  assert.equal(await after(11_000, true), 4);
  assert.equal(await after(60_000, false), 5, 'unwritten: at the interval');
});

test('a template build whose control plane stopped (no heartbeat for a minute) is failed by the maintenance, and its session deleted', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const heartbeatAt = new Date(s.clock.now).toISOString();
  const build = {
    tenantId: s.caller.tenantId,
    name: 'py',
    status: 'running' as const,
    createdAt: heartbeatAt,
    endedAt: null,
    error: null,
    version: null,
    steps: 1,
    cachedSteps: 0,
    log: '',
  };
  await s.store.insertBuild({ ...build, id: 'bld_stale0000001', sessionId: session.id, heartbeatAt });
  await s.store.insertBuild({ ...build, id: 'bld_alive0000001', sessionId: null, heartbeatAt: new Date(s.clock.now + 60_000).toISOString() });
  s.clock.now += 70_000;
  await s.maintenance.tick();
  const stale = await s.store.getBuild(s.caller.tenantId, 'bld_stale0000001');
  assert.deepEqual([stale?.status, /control plane running the build stopped/.test(stale?.error ?? '')], ['failed', true]);
  assert.equal((await s.store.getBuild(s.caller.tenantId, 'bld_alive0000001'))?.status, 'running', 'a build with a recent heartbeat runs on');
  assert.equal(await s.store.getSession(s.caller.tenantId, session.id), null, "the dead build's session is deleted");
});

/**
 * Services whose store notes each session a pass takes its turn for (its lease), in `leased`, and
 * each it records a next visit for (a look that found nothing to do, or after its turn), in `scheduled`.
 */
async function servicesNotingVisits() {
  const real = await openSqliteStore(':memory:');
  const leased: string[] = [];
  const scheduled: string[] = [];
  const called = new Map<string | symbol, number>();
  const store = new Proxy(real, {
    get(target, prop, receiver) {
      called.set(prop, (called.get(prop) ?? 0) + 1);
      if (prop === 'acquireSessionLease')
        return (lease: { sessionId: string }, now: number) => (leased.push(lease.sessionId), target.acquireSessionLease(lease as never, now));
      if (prop === 'scheduleMaintenance')
        return (schedules: MaintenanceSchedule[]) => (scheduled.push(...schedules.map((s) => s.id)), target.scheduleMaintenance(schedules));
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  /** The sessions a pass visited: leased or scheduled. */
  const visited = () => [...new Set([...leased, ...scheduled])].sort();
  /** How often each of these store methods was called since the last `calls()`. */
  const calls = (...names: string[]) => {
    const counts = names.map((name) => called.get(name) ?? 0);
    called.clear();
    return counts;
  };
  return { s: await servicesOnFakeNode({}, store), leased, scheduled, visited, calls };
}

test('a pass visits the sessions anything may be due for (a sandbox, a start, a timeout passed), not the others however many; an expired stopped one is expired', async () => {
  const { s, leased, scheduled, visited } = await servicesNotingVisits();
  const busy = await s.create({ checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const model = (await s.store.findSession(busy.id))!;
  const stopped = { status: 'stopped' as const, sandboxId: null, nodeId: null, sandboxStartedAt: null, expiresAt: null };
  for (let i = 0; i < 200; i++) await s.store.insertSession({ ...model, ...stopped, id: `ses_stopped${String(i).padStart(4, '0')}` });
  await s.store.insertSession({ ...model, ...stopped, id: 'ses_timedout01', expiresAt: new Date(s.clock.now - 1000).toISOString(), onTimeout: 'delete' });
  leased.length = 0;
  scheduled.length = 0;
  await s.maintenance.tick();
  assert.deepEqual(visited(), [busy.id, 'ses_timedout01'].sort());
  assert.deepEqual(leased, ['ses_timedout01'], 'a look found nothing to do for the busy one: no lease');
  assert.equal(await s.store.findSession('ses_timedout01'), null, 'its timeout deleted it');
});

test('a running session is visited when something comes due for it, not every pass; a sandbox gone or a new one is seen at once', async () => {
  const { s, leased, scheduled, visited, calls } = await servicesNotingVisits();
  const create = () => s.create({ checkpointIntervalSec: 60, fullCheckpointIntervalSec: 0, idleTimeoutSec: 600 });
  const created = [await create(), await create(), await create()];
  const [a, b] = created;
  const visits = async (ms: number) => {
    s.clock.now += ms;
    leased.length = 0;
    scheduled.length = 0;
    await s.maintenance.tick();
    return visited();
  };
  const ids = (...sessions: typeof created) => sessions.map((x) => x.id).sort();
  calls();
  assert.deepEqual(await visits(5000), ids(...created), 'never visited: each works out when it is next due');
  assert.deepEqual(leased, [], 'by a look: nothing to do, no lease');
  assert.deepEqual(
    calls('listNewestCheckpoints', 'listCheckpoints', 'scheduleMaintenance'),
    [1, 0, 1],
    "the looks' checkpoints read for all three at once, their next visits written together",
  );
  for (let i = 0; i < 10; i++) assert.deepEqual(await visits(5000), [], 'nothing due: no visit');
  assert.deepEqual(await visits(10_000), ids(...created), 'their first checkpoint came due (60 s after the start)');
  assert.deepEqual(leased.sort(), ids(...created), 'taken in their turn');
  for (const x of created) assert.equal((await s.store.listCheckpoints(x.id)).length, 1);
  // Its node no longer runs a's sandbox: seen by comparing the node's list with the store, not by a visit due.
  s.node.killBehindTheScenes(a.sandbox!.id);
  assert.deepEqual(await visits(5000), ids(a));
  assert.equal((await s.sessions.get(s.caller, a.id)).status, 'stopped');
  // A new sandbox (a call resumes a) and a timeout set (b): due at once.
  await s.calls.withSandbox(s.caller, a.id, { repeatable: true }, async () => 'ok');
  await s.pauser.setTimeout(s.caller, b.id, 30);
  assert.deepEqual(await visits(5000), ids(a, b));
  assert.deepEqual(await visits(5000), []);
  assert.deepEqual(await visits(25_000), ids(b), 'its timeout came');
});

test('a live node that does not list its sandboxes is said once, its sessions left until it lists them again, and said again then', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create({ checkpointIntervalSec: 1, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  s.node.listError = new Error('node fake-node sent a malformed reply');
  const said = () => s.log.filter((m) => /list its sandboxes|lists its sandboxes/.test(m));
  for (let i = 0; i < 3; i++) {
    s.clock.now += 5000;
    await s.maintenance.tick();
  }
  assert.deepEqual(said(), [
    `node ${s.node.nodeId} did not list its sandboxes: node fake-node sent a malformed reply; its sessions are not maintained until it does`,
  ]);
  assert.equal((await s.store.listCheckpoints(session.id)).length, 0, 'its session was not maintained');
  s.node.listError = null;
  s.clock.now += 5000;
  await s.maintenance.tick();
  assert.equal(said().length, 2);
  assert.match(said()[1]!, /lists its sandboxes again/);
  assert.equal((await s.store.listCheckpoints(session.id)).length, 1, 'maintained again: its checkpoint, due since');
});

test('with another control plane on the store, a pass maintains the sessions on the nodes of its share only', async () => {
  // Whichever of the two takes the node depends on their ids: one that sorts before this one (the test's is "/<hex>"), then one after.
  const outcomes = [];
  for (const other of ['!control-plane/1', 'zz-control-plane/1']) {
    const s = await servicesOnFakeNode();
    const sessions = [];
    for (let i = 0; i < 6; i++) sessions.push(await s.create({ checkpointIntervalSec: 1, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 }));
    await s.store.heardControlPlane(other, s.clock.now);
    await s.roster.beat();
    assert.equal(s.roster.size, 2);
    s.clock.now += 2000;
    const [calls, listings] = [s.node.calls.length, s.node.listings];
    await s.maintenance.tick();
    let checkpointed = 0;
    for (const session of sessions) if ((await s.store.listCheckpoints(session.id)).length > 0) checkpointed++;
    const ours = s.roster.owns(s.node.nodeId);
    assert.equal(checkpointed, ours ? sessions.length : 0, `this control plane ${ours ? 'owns' : 'does not own'} the node`);
    if (!ours) assert.deepEqual([s.node.calls.length, s.node.listings], [calls, listings], 'a node of the other share is not asked anything');
    outcomes.push(ours);
  }
  assert.deepEqual(outcomes.sort(), [false, true], 'one control plane or the other takes the node');
});
