import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCode, SpaceError } from '@space/protocol';
import type { SandboxTarget } from './session-service.js';
import { CallDeadline } from '@space/server-kit';
import { openSqliteStore } from '../store/open-store.js';
import { servicesOnFakeNode } from '../test-support/services.js';

test('a repeatable call whose sandbox died before it arrived is sent again to a new sandbox', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  s.node.killBehindTheScenes(session.sandbox!.id);
  const seen: string[] = [];
  const result = await s.calls.withSandbox(s.caller, session.id, { repeatable: true }, async (target: SandboxTarget) => {
    seen.push(target.sandboxId);
    await s.node.sandboxInfo(target.sandboxId);
    return 'done';
  });
  assert.equal(result, 'done');
  assert.equal(seen.length, 2);
  assert.notEqual(seen[1], seen[0]);
  const history = (await s.sessions.get(s.caller, session.id)).sandboxHistory!;
  assert.deepEqual(
    history.map((h) => h.endReason),
    ['died', null],
  );
});

test('a call that waited behind a lifecycle operation past its deadline is dropped unrun; one within it runs', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  let release = (): void => undefined;
  const holding = s.lifecycle.run(session.id, 'maintenance', () => new Promise<void>((resolve) => (release = resolve)));
  let ran = 0;
  const op = async (): Promise<void> => void ran++;
  const late = s.calls.withSandbox(s.caller, session.id, { repeatable: true, deadline: CallDeadline.after(50) }, op);
  const patient = s.calls.withSandbox(s.caller, session.id, { repeatable: true, deadline: CallDeadline.after(60_000) }, op);
  await new Promise((resolve) => setTimeout(resolve, 120));
  release();
  await holding;
  await assert.rejects(late, (err: SpaceError) => err.code === ErrorCode.DEADLINE_EXCEEDED && /was not run/.test(err.message));
  await patient;
  assert.equal(ran, 1, 'only the call within its deadline ran');
  // What is left of its budget goes on to the node, which checks it again after any wait there.
  assert.equal(s.node.budgetsMs.length, 1);
  assert.ok(s.node.budgetsMs[0]! > 59_000 && s.node.budgetsMs[0]! <= 60_000 - 120, `sent with ${s.node.budgetsMs[0]} ms left`);
});

test('a call during which the sandbox died is not repeated; the next call resumes the session', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  let calls = 0;
  await assert.rejects(
    s.calls.withSandbox(s.caller, session.id, { repeatable: true }, async () => {
      calls++;
      throw new SpaceError(ErrorCode.SANDBOX_DIED, 'died mid-call');
    }),
    { code: 'SANDBOX_DIED' },
  );
  assert.equal(calls, 1);
  const target = await s.calls.withSandbox(s.caller, session.id, { repeatable: false }, async (t: SandboxTarget) => t);
  assert.notEqual(target.sandboxId, session.sandbox!.id);
});

test('a streamed call checks the sandbox first and resumes the session instead of failing', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  s.node.killBehindTheScenes(session.sandbox!.id);
  let calls = 0;
  const target = await s.calls.withSandbox(s.caller, session.id, { repeatable: false }, async (t: SandboxTarget) => {
    calls++;
    return t;
  });
  assert.equal(calls, 1);
  assert.ok(s.node.sandboxes.has(target.sandboxId));
});

test('calls arriving together on a session without a sandbox start exactly one', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  s.node.killBehindTheScenes(session.sandbox!.id);
  const startsBefore = s.node.calls.filter((c) => c.startsWith('start')).length;
  const targets = await Promise.all(
    Array.from({ length: 5 }, () => s.calls.withSandbox(s.caller, session.id, { repeatable: false }, async (t: SandboxTarget) => t.sandboxId)),
  );
  assert.equal(new Set(targets).size, 1);
  assert.equal(s.node.calls.filter((c) => c.startsWith('start')).length - startsBefore, 1);
});

test('a call whose session is deleted under it gets SESSION_NOT_FOUND; a call stopped by a restore is told so', async () => {
  const s = await servicesOnFakeNode();
  const doomed = await s.create();
  await assert.rejects(
    s.calls.withSandbox(s.caller, doomed.id, { repeatable: true }, async () => {
      await s.sessions.delete(s.caller, doomed.id);
      throw new SpaceError(ErrorCode.SANDBOX_DIED, 'stopped');
    }),
    { code: 'SESSION_NOT_FOUND' },
  );
  const session = await s.create();
  const checkpoint = await s.checkpoints.create(s.caller, session.id);
  await assert.rejects(
    s.calls.withSandbox(s.caller, session.id, { repeatable: true }, async () => {
      await s.checkpoints.restore(s.caller, session.id, checkpoint.id);
      throw new SpaceError(ErrorCode.SANDBOX_DIED, 'stopped');
    }),
    (err: SpaceError) => err.code === 'SANDBOX_STOPPED' && err.status === 409 && /restored to a checkpoint/.test(err.message),
  );
});

test("another tenant's session answers like one that does not exist", async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  await assert.rejects(s.sessions.get({ tenantId: 'tn_other0001', admin: false }, session.id), { code: 'SESSION_NOT_FOUND' });
});

/** A session written after its full checkpoint whose sandbox died; its first resume goes back to that checkpoint, then the start fails (as when the platform dies there). */
async function resumeCutShort() {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  const full = await s.checkpoints.create(s.caller, session.id, 'full');
  s.node.changed.add(session.id);
  s.node.killBehindTheScenes(session.sandbox!.id);
  s.node.failingStarts = 1;
  const useSandbox = (t: SandboxTarget) => s.node.sandboxInfo(t.sandboxId);
  await assert.rejects(s.calls.withSandbox(s.caller, session.id, { repeatable: true }, useSandbox), { code: 'NODE_UNAVAILABLE' });
  return { s, session, full, useSandbox };
}

test('a resume that went back to a full checkpoint is told in the history even when the start after it failed', async () => {
  const { s, session, full, useSandbox } = await resumeCutShort();
  await s.calls.withSandbox(s.caller, session.id, { repeatable: true }, useSandbox);
  const history = (await s.sessions.get(s.caller, session.id)).sandboxHistory!;
  const kept = (await s.checkpoints.list(s.caller, session.id)).find((c) => c.trigger === 'resume')!;
  assert.match(
    history.at(-1)!.note ?? '',
    new RegExp(`went back to ${full.id} of ${full.createdAt} to restore its processes; the files written after it are kept in ${kept.id}`),
  );
  assert.equal((await s.store.getSession(s.caller.tenantId, session.id))!.resumeNote, null, 'told once');
});

test('a resume cut short after it went back, then another: the history still names where the newer files were kept first', async () => {
  const { s, session, full, useSandbox } = await resumeCutShort();
  // The volume the first resume put back reads as written again (a chaos run saw it), so the next takes its own copy.
  s.node.changed.add(session.id);
  await s.calls.withSandbox(s.caller, session.id, { repeatable: true }, useSandbox);
  const [first, second] = (await s.checkpoints.list(s.caller, session.id)).filter((c) => c.trigger === 'resume');
  const wentBack = `went back to ${full.id} of ${full.createdAt} to restore its processes; the files written after it are kept in`;
  assert.equal((await s.sessions.get(s.caller, session.id)).sandboxHistory!.at(-1)!.note, `${wentBack} ${first!.id}; ${wentBack} ${second!.id}`);
});

/** Calls the session once, its sandbox dying under the call as the node says (`endReason`); returns the sandbox the call had. */
async function dieInCall(s: Awaited<ReturnType<typeof servicesOnFakeNode>>, sessionId: string, endReason?: string): Promise<string> {
  let sandboxId = '';
  await assert.rejects(
    s.calls.withSandbox(s.caller, sessionId, { repeatable: true }, async (t: SandboxTarget) => {
      sandboxId = t.sandboxId;
      s.node.killBehindTheScenes(t.sandboxId);
      throw new SpaceError(ErrorCode.SANDBOX_DIED, 'died', endReason ? { endReason } : undefined);
    }),
    { code: 'SANDBOX_DIED' },
  );
  return sandboxId;
}

test('a full checkpoint whose restores die of it is not restored again: once they stopped answering, twice they died; the newest files boot', async () => {
  const s = await servicesOnFakeNode();
  const useSandbox = (t: SandboxTarget) => s.node.sandboxInfo(t.sandboxId);
  const history = async (id: string) => (await s.sessions.get(s.caller, id)).sandboxHistory!;

  const wedged = await s.create();
  const full = await s.checkpoints.create(s.caller, wedged.id, 'full');
  await dieInCall(s, wedged.id);
  const restored = await dieInCall(s, wedged.id, 'unresponsive');
  assert.equal((await history(wedged.id)).at(-1)!.restoredFrom, full.id);
  await s.calls.withSandbox(s.caller, wedged.id, { repeatable: true }, useSandbox);
  const booted = (await history(wedged.id)).at(-1)!;
  assert.equal(booted.restoredFrom, null);
  assert.equal(
    booted.note,
    `booted on the newest files; the processes of ${full.id} were not restored: the sandbox restored from it (${restored}) stopped answering and was stopped`,
  );
  // Not tried again after a sandbox that booted on the files in between.
  await s.sessions.killSandbox(s.caller, wedged.id);
  await s.calls.withSandbox(s.caller, wedged.id, { repeatable: true }, useSandbox);
  assert.equal((await history(wedged.id)).at(-1)!.restoredFrom, null);

  const crashing = await s.create();
  const fullToo = await s.checkpoints.create(s.caller, crashing.id, 'full');
  await dieInCall(s, crashing.id);
  const first = await dieInCall(s, crashing.id);
  await s.calls.withSandbox(s.caller, crashing.id, { repeatable: true }, useSandbox);
  assert.equal((await history(crashing.id)).at(-1)!.restoredFrom, fullToo.id, 'one death of a restore may be the host: restored again');
  const second = (await history(crashing.id)).at(-1)!.id;
  await dieInCall(s, crashing.id, 'oom');
  await s.calls.withSandbox(s.caller, crashing.id, { repeatable: true }, useSandbox);
  const last = (await history(crashing.id)).at(-1)!;
  assert.equal(last.restoredFrom, null);
  assert.match(last.note ?? '', new RegExp(`the last two sandboxes restored from it died \\(${first}: died, ${second}: oom\\)`));
  // A newer full checkpoint is restored as usual.
  const newer = await s.checkpoints.create(s.caller, crashing.id, 'full');
  await dieInCall(s, crashing.id);
  await s.calls.withSandbox(s.caller, crashing.id, { repeatable: true }, useSandbox);
  assert.equal((await history(crashing.id)).at(-1)!.restoredFrom, newer.id);
});

test('each sandbox start is a placement of its own, and the node is called at the placement read', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  assert.equal((await s.store.getSession(s.caller.tenantId, session.id))?.placementEpoch, 1);
  s.node.killBehindTheScenes(session.sandbox!.id);
  await s.calls.withSandbox(s.caller, session.id, { repeatable: true }, async (t: SandboxTarget) => s.node.sandboxInfo(t.sandboxId));
  assert.equal((await s.store.getSession(s.caller.tenantId, session.id))?.placementEpoch, 2);
  assert.ok(s.node.placements.includes(`${session.id} 1`) && s.node.placements.includes(`${session.id} 2`), s.node.placements.join(', '));
});

test('a start from a row another control plane placed anew since is refused before it calls a node, and leaves the row as it is', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  await s.sessions.killSandbox(s.caller, session.id);
  const stale = (await s.store.getSession(s.caller.tenantId, session.id))!;
  await s.store.advancePlacement(session.id, stale.placementEpoch); // the other control plane's placement
  await s.store.updateSession(session.id, { status: 'starting' });
  const starts = s.node.calls.filter((c) => c.startsWith('start')).length;
  await assert.rejects(s.sessions.startSandbox(stale, { volumeReady: false }), { code: 'PLACEMENT_STALE' });
  assert.equal(s.node.calls.filter((c) => c.startsWith('start')).length, starts, 'no sandbox started');
  const row = await s.store.getSession(s.caller.tenantId, session.id);
  assert.deepEqual([row?.status, row?.placementEpoch], ['starting', stale.placementEpoch + 1]);
});

test('a start placed anew while it ran stops the sandbox it got, and the call goes to the one the newer placement started', async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  s.node.killBehindTheScenes(session.sandbox!.id);
  const start = s.node.startSandbox.bind(s.node);
  let theirs = '';
  s.node.startSandbox = async (request) => {
    const ours = await start(request);
    // Meanwhile another control plane (this one stalled) placed the session and started its own.
    s.node.startSandbox = start;
    const read = (await s.store.getSession(s.caller.tenantId, session.id))!;
    await s.store.advancePlacement(session.id, read.placementEpoch);
    theirs = (await start(request)).sandboxId;
    await s.store.updateSession(session.id, { status: 'running', sandboxId: theirs, nodeId: s.node.nodeId });
    return ours;
  };
  const target = await s.calls.withSandbox(s.caller, session.id, { repeatable: false }, async (t: SandboxTarget) => t.sandboxId);
  assert.equal(target, theirs);
  const stops = s.node.calls.filter((c) => c.startsWith('stop'));
  assert.equal(stops.length, 1, 'the sandbox the stale start got is stopped');
  assert.notEqual(stops[0], `stop ${theirs}`);
  const row = await s.store.getSession(s.caller.tenantId, session.id);
  assert.deepEqual([row?.status, row?.sandboxId], ['running', theirs], 'the newer placement keeps its row');
});

test("a repeatable call a node refused for naming an older placement is sent once more, at the store's placement; another call is not", async () => {
  const s = await servicesOnFakeNode();
  const session = await s.create();
  const stale = () => new SpaceError(ErrorCode.PLACEMENT_STALE, 'placed anew');
  let tries = 0;
  const result = await s.calls.withSandbox(s.caller, session.id, { repeatable: true }, async () => {
    if (++tries === 1) throw stale();
    return 'done';
  });
  assert.deepEqual([result, tries], ['done', 2]);
  tries = 0;
  await assert.rejects(
    s.calls.withSandbox(s.caller, session.id, { repeatable: false }, async () => {
      tries++;
      throw stale();
    }),
    { code: 'PLACEMENT_STALE' },
  );
  assert.equal(tries, 1);
});

test("a node's stop marks its sessions stopped at the placement read: one another control plane placed anew meanwhile is left as that one made it", async () => {
  const real = await openSqliteStore(':memory:');
  let raceWith: string | null = null;
  // Another control plane places one session anew just after the list is read.
  const store = new Proxy(real, {
    get(target, prop, receiver) {
      if (prop === 'listSessionsOnNode')
        return async (nodeId: string) => {
          const rows = await target.listSessionsOnNode(nodeId);
          const raced = rows.find((r) => r.id === raceWith);
          if (raced) await target.advancePlacement(raced.id, raced.placementEpoch);
          return rows;
        };
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const s = await servicesOnFakeNode({}, store);
  const stopped = await s.create();
  const placedElsewhere = await s.create();
  raceWith = placedElsewhere.id;
  await s.sessions.nodeStopped(s.node.nodeId);
  const first = await s.sessions.get(s.caller, stopped.id);
  assert.deepEqual([first.status, first.sandbox, first.sandboxHistory!.at(-1)!.endReason], ['stopped', null, 'node stopped']);
  const second = await s.sessions.get(s.caller, placedElsewhere.id);
  assert.equal(second.status, 'running', 'left as the newer placement made it');
  assert.equal(second.sandboxHistory!.at(-1)!.endReason, null);
});
