// The chaos run (a test harness): the workload, the faults and the final accounting, read as one.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Api, type ApiReply } from '../client.js';
import { sandboxHostPid } from '../host-state.js';
import { testDataDir } from '../platform.js';
import { clusterTarget, platformTarget } from './chaos-targets.js';
import { Random } from './random.js';

export interface ChaosOptions {
  sessions: number;
  /**
   * How many of each fault, by name: `sandbox` is a SIGKILL of a random session's sandbox process
   * from outside (as an OOM kill or a crash would); the others are the target's (`platform` for
   * one `space up`; `node`, `controlPlane` and `partition` for a cluster), each a SIGKILL followed by a restart, or a cut then a heal.
   */
  faults: Record<string, number>;
  /** Run on the small cluster (PostgreSQL, two control planes, three nodes, an object store) instead of one `space up`. */
  cluster?: boolean;
  /** Mean time between two faults, ms (each wait is 0.5–1.5 times it). */
  faultIntervalMs: number;
  seed: number;
  dataDir?: string;
  log?: (line: string) => void;
  /** Gets the platform's output (each process's whole log when it ends; a cluster's members line by line). */
  platformLog?: (text: string) => void;
  /** Ends the faults early; the run then accounts for what it has and cleans up as usual. */
  signal?: AbortSignal;
}

/** An append the platform acknowledged: record `n` was in the session's file when the call returned at `at`. */
interface Ack {
  n: number;
  at: number;
}

interface SessionAccount {
  id: string;
  acknowledged: number;
  /** Acknowledged records missing from the live file that a rollback to a full checkpoint explains, and found in a checkpoint. */
  keptInCheckpoints: number;
  /** Acknowledged records found nowhere: neither in the live file nor in any checkpoint. */
  lost: number[];
  /**
   * Acknowledged records written after the newest shipped checkpoint of a node that was then lost:
   * the session moved on from that checkpoint, and they stayed on the lost node (the promise for a
   * node's loss), not rescued into a checkpoint (yet) when it came back.
   */
  leftOnLostNode: number[];
  /** (record, checkpoint) pairs where the record was acknowledged before the checkpoint on the same timeline and is not in it. */
  missingFromCheckpoints: { n: number; checkpointId: string }[];
  /** How far back each resume from a full checkpoint took the files, ms (what it wrote since is in a `resume` checkpoint). */
  rollbacksMs: number[];
  /** For each move off a lost node, how much acknowledged writing it left behind there: from its checkpoint to the last such write, ms. */
  nodeLossWindowsMs: number[];
  /** Checkpoints listed whose snapshot no node holds (not accounted against), with what the store says of them. */
  unreadableCheckpoints: number;
  unreadable: { id: string; kind: string; trigger: string; createdAt: string; shippedAt?: string | null }[];
  checkpoints: number;
  answering: boolean;
  /** The last answer to the final read of the live file, when it failed. */
  liveError?: unknown;
  /** When anything is missing: what the account was made from, to find out why. */
  evidence?: {
    checkpoints: { id: string; kind: string; trigger: string; createdAt: string; records: number; newest: number; missing: number }[];
    history: unknown[];
    acks: { first: Ack | undefined; last: Ack | undefined };
    missingAcks: Ack[];
  };
}

export interface ChaosReport {
  seed: number;
  cluster: boolean;
  durationMs: number;
  sessions: number;
  /** The faults that landed, by name (a sandbox kill can find the sandbox already gone). */
  faults: Record<string, number>;
  acknowledged: number;
  failedCalls: number;
  /** Writes that got no answer within `callTimeoutMs` (a call must never hang: each is a defect to chase), by session and time. */
  stuckCalls: { sessionId: string; at: string }[];
  checkpoints: number;
  /** Must be 0: a checkpoint holds every record acknowledged before it (on its timeline). */
  missingFromCheckpoints: number;
  /** Must be 0: every acknowledged record is in the live files or in a checkpoint. */
  lost: number;
  keptOnlyInCheckpoints: number;
  /** Written after the newest shipped checkpoint of a node that was lost: left on that node (see SessionAccount). */
  leftOnLostNodes: number;
  /** The longest span of acknowledged writes a node's loss left behind, ms. */
  maxNodeLossWindowMs: number;
  unreadableCheckpoints: number;
  /** The largest rollback of any resume, ms: the files of that window are in a `resume` checkpoint, not in the live volume. */
  maxRollbackMs: number;
  rollbacks: number;
  sessionsAnswering: number;
  /** Sessions with a running sandbox on more than one node at the end (`<id> on <nodes>`): must be none. */
  twoActingCopies: string[];
  accounts: SessionAccount[];
}

/** A write with no answer by then is counted as stuck and given up on, so one hung call cannot stall the run (undici would wait 300 s). */
const callTimeoutMs = 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A chaos run: busy sessions append numbered records through the API (each acknowledged when its
 * call returns), while sandboxes are SIGKILLed from outside and the platform's processes are
 * SIGKILLed and restarted at random moments. Then every acknowledged record is accounted for
 * against the live files and every checkpoint (read from the nodes' btrfs snapshots), and every
 * session must answer. Bounded: it ends after its faults.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const rng = new Random(options.seed);
  const log = options.log ?? (() => undefined);
  const adminKey = `chaos-${process.pid}-${options.seed}`;
  // The platform logs everything only when someone reads it.
  const env = { SPACE_MAINTENANCE_TICK_MS: '1000', ...(options.platformLog ? { SPACE_QUIET: '0' } : {}) };
  const targetOptions = { dataDir: options.dataDir ?? testDataDir, adminKey, env, platformLog: options.platformLog };
  const target = await (options.cluster ? clusterTarget(targetOptions) : platformTarget(targetOptions));
  for (const kind of Object.keys(options.faults))
    if (kind !== 'sandbox' && !target.faults[kind]) throw new Error(`no fault "${kind}" here: sandbox, ${Object.keys(target.faults).join(', ')}`);
  const started = performance.now();
  // Calls go to each control plane in turn; their addresses change when one restarts.
  let turn = 0;
  const api = () => {
    const urls = target.apiUrls();
    return new Api(urls[turn++ % urls.length]!, adminKey);
  };
  // Every call bounded: a hung platform fails the run with its output instead of outlasting the test's timeout.
  const call = (method: string, p: string, body?: unknown): Promise<ApiReply> => api().call(method, p, body, { signal: AbortSignal.timeout(callTimeoutMs) });
  const ids: string[] = [];
  let runFailure: Error | null = null;
  try {
    for (let i = 0; i < options.sessions; i++) {
      const created = await call('POST', '/v1/sessions', { template: 'tiny', checkpointIntervalSec: 2, fullCheckpointIntervalSec: 5, idleTimeoutSec: 0 });
      if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
      ids.push(created.body.id);
      // A process, so full checkpoints are taken and resumes restore it (rolling files back to them).
      await call('POST', `/v1/sessions/${created.body.id}/exec`, { cmd: 'sleep 1000000', background: true });
    }

    let stopped = false;
    let failedCalls = 0;
    const stuckCalls: { sessionId: string; at: string }[] = [];
    const acks = new Map<string, Ack[]>(ids.map((id) => [id, []]));
    const writer = async (id: string): Promise<void> => {
      for (let n = 1; !stopped; n++) {
        const sent = new Date().toISOString();
        const reply = await api()
          .call('POST', `/v1/sessions/${id}/exec`, { cmd: `echo ${n} >> /workspace/log` }, { signal: AbortSignal.timeout(callTimeoutMs) })
          .catch((err: Error) => {
            if (err.name === 'TimeoutError') stuckCalls.push({ sessionId: id, at: sent });
            return null;
          });
        if (reply?.status === 200 && reply.body.exitCode === 0) acks.get(id)!.push({ n, at: Date.now() });
        else {
          failedCalls++;
          await sleep(100);
        }
      }
    };
    const writers = ids.map(writer);

    const faults = rng.shuffle(Object.entries(options.faults).flatMap(([kind, count]) => Array<string>(count).fill(kind)));
    /** SIGKILLs the sandbox of a random session; a session without one (being resumed) gives its turn to another, three tries. */
    const killSomeSandbox = async (): Promise<boolean> => {
      for (let attempt = 0; attempt < 3; attempt++) {
        const session = (await call('GET', `/v1/sessions/${rng.pick(ids)}`).catch(() => null))?.body;
        if (!session?.sandbox || !session.nodeId) continue;
        try {
          process.kill(sandboxHostPid(target.nodeDataDir(session.nodeId), session.sandbox.id), 'SIGKILL');
          return true;
        } catch {
          // The sandbox ended meanwhile (a resume, a restore, a move).
        }
      }
      return false;
    };
    const landed: Record<string, number> = Object.fromEntries(Object.keys(options.faults).map((kind) => [kind, 0]));
    for (const fault of faults) {
      if (options.signal?.aborted) break;
      await sleep(rng.int(options.faultIntervalMs / 2, (options.faultIntervalMs * 3) / 2));
      if (fault === 'sandbox') {
        if (await killSomeSandbox()) landed.sandbox!++;
        continue;
      }
      const what = await target.faults[fault]!(rng);
      landed[fault]!++;
      log(`chaos: ${what} (${landed[fault]}/${options.faults[fault]})`);
    }
    stopped = true;
    await Promise.all(writers);

    const accounts: SessionAccount[] = [];
    for (const id of ids) accounts.push(await account(id, acks.get(id)!, call, target.nodeDataDirs()));
    // After every fault healed and every session answered: each runs on one node at most.
    const twoActingCopies = [...(await target.actingCopies())]
      .filter(([id, nodes]) => ids.includes(id) && nodes.length > 1)
      .map(([id, nodes]) => `${id} on ${nodes.join(', ')}`);
    const sum = (f: (a: SessionAccount) => number) => accounts.reduce((total, a) => total + f(a), 0);
    return {
      seed: options.seed,
      cluster: options.cluster ?? false,
      durationMs: Math.round(performance.now() - started),
      sessions: ids.length,
      faults: landed,
      acknowledged: sum((a) => a.acknowledged),
      failedCalls,
      stuckCalls,
      checkpoints: sum((a) => a.checkpoints),
      missingFromCheckpoints: sum((a) => a.missingFromCheckpoints.length),
      lost: sum((a) => a.lost.length),
      keptOnlyInCheckpoints: sum((a) => a.keptInCheckpoints),
      leftOnLostNodes: sum((a) => a.leftOnLostNode.length),
      maxNodeLossWindowMs: Math.max(0, ...accounts.flatMap((a) => a.nodeLossWindowsMs)),
      unreadableCheckpoints: sum((a) => a.unreadableCheckpoints),
      maxRollbackMs: Math.max(0, ...accounts.flatMap((a) => a.rollbacksMs)),
      rollbacks: sum((a) => a.rollbacksMs.length),
      sessionsAnswering: sum((a) => (a.answering ? 1 : 0)),
      twoActingCopies,
      accounts,
    };
  } catch (err) {
    runFailure = err as Error;
    throw err;
  } finally {
    for (const id of ids) await call('DELETE', `/v1/sessions/${id}`).catch(() => undefined);
    // A stop that fails after the run failed must not hide why the run failed: both are told.
    await target.stop().catch((stopFailure: Error) => {
      throw runFailure ? new Error(`${runFailure.message}\n… and then the stop failed: ${stopFailure.message}`, { cause: runFailure }) : stopFailure;
    });
  }
}

function records(text: string): Set<number> {
  return new Set(text.split('\n').filter(Boolean).map(Number));
}

/**
 * One session's records against its live file and its checkpoints. The timeline: a resume that
 * restored a full checkpoint put the files back to that checkpoint, so a record acknowledged after
 * the checkpoint and before the resume is expected in no later checkpoint, only in the one the
 * resume kept (trigger `resume`).
 */
async function account(
  id: string,
  acks: Ack[],
  call: (method: string, p: string, body?: unknown) => Promise<ApiReply>,
  nodeDataDirs: string[],
): Promise<SessionAccount> {
  // A session may still be settling from the last fault (a resume, a move): a few tries before it counts as not answering.
  // A call with no answer in time counts as not answering (status 0), said in the report rather than thrown.
  const readLog = () =>
    call('POST', `/v1/sessions/${id}/exec`, { cmd: 'cat /workspace/log' }).catch((err: Error) => {
      if (err.name !== 'TimeoutError') throw err;
      return { status: 0, body: { error: `no answer within ${callTimeoutMs / 1000} s` }, headers: new Headers() };
    });
  let live = await readLog();
  for (let attempt = 1; attempt < 4 && live.status !== 200; attempt++) {
    await sleep(3000);
    live = await readLog();
  }
  const session = (await call('GET', `/v1/sessions/${id}`)).body;
  const listed: { id: string; kind: string; trigger: string; createdAt: string; shippedAt?: string | null }[] = (
    await call('GET', `/v1/sessions/${id}/checkpoints`)
  ).body.checkpoints;
  // Each checkpoint's snapshot on whichever node holds it (a cluster's nodes fetch copies; all alike).
  const snapshotOf = (checkpointId: string) =>
    nodeDataDirs.map((dir) => path.join(dir, 'btrfs/checkpoints', checkpointId)).find((snapshot) => existsSync(snapshot));
  const checkpoints = listed.filter((c) => snapshotOf(c.id) !== undefined);
  const checkpointTimes = new Map(listed.map((c) => [c.id, Date.parse(c.createdAt)]));
  const contents = new Map(
    checkpoints.map((c) => {
      const file = path.join(snapshotOf(c.id)!, 'workspace/log');
      return [c.id, existsSync(file) ? records(readFileSync(file, 'utf8')) : new Set<number>()];
    }),
  );
  // Each rollback: when the volume went back, and to which moment (the restored checkpoint's time).
  // A restore whose memory image failed still put the files back: its note says so. A move off a
  // lost node went back to the newest shipped checkpoint: its note names it and its time.
  const history = session.sandboxHistory as { startedAt: string; restoredFrom: string | null; note: string | null }[];
  const rollbacks = history
    .flatMap((h) => {
      const moved = /was lost: the session moved to node \S+ from ckp_\w+ of (\S+)/.exec(h.note ?? '');
      if (moved) return [{ at: Date.parse(h.startedAt), to: Date.parse(moved[1]!), nodeLost: true }];
      // The note dates the checkpoint it went back to (retention may have pruned it since), and the
      // volume went back right after the `resume` checkpoint it names was taken: one start may tell
      // of two, when a crash cut the first resume short.
      const wentBack = [
        ...(h.note ?? '').matchAll(/went back to ckp_\w+ of (\S+) to restore its processes; the files written after it are kept in (ckp_\w+)/g),
      ];
      if (wentBack.length) return wentBack.map((m) => ({ at: checkpointTimes.get(m[2]!) ?? Date.parse(h.startedAt), to: Date.parse(m[1]!), nodeLost: false }));
      return [{ at: Date.parse(h.startedAt), to: h.restoredFrom ? checkpointTimes.get(h.restoredFrom) : undefined, nodeLost: false }];
    })
    .filter((r): r is { at: number; to: number; nodeLost: boolean } => r.to !== undefined);
  const survives = (ack: Ack, until: number) => rollbacks.every((r) => r.at <= ack.at || r.at >= until || ack.at < r.to);
  const inNodeLossWindow = (ack: Ack) => rollbacks.some((r) => r.nodeLost && ack.at >= r.to && ack.at < r.at);

  const liveRecords = live.status === 200 ? records(live.body.stdout) : new Set<number>();
  const missingFromCheckpoints: SessionAccount['missingFromCheckpoints'] = [];
  const lost: number[] = [];
  const leftOnLostNode: number[] = [];
  let keptInCheckpoints = 0;
  for (const ack of acks) {
    for (const c of checkpoints) {
      // A rescue holds the volume left on a lost node: another timeline than the session's since.
      if (c.trigger === 'rescue') continue;
      const takenAt = checkpointTimes.get(c.id)!;
      if (ack.at < takenAt && survives(ack, takenAt) && !contents.get(c.id)!.has(ack.n)) missingFromCheckpoints.push({ n: ack.n, checkpointId: c.id });
    }
    if (liveRecords.has(ack.n)) continue;
    if ([...contents.values()].some((set) => set.has(ack.n))) keptInCheckpoints++;
    else if (inNodeLossWindow(ack)) leftOnLostNode.push(ack.n);
    else lost.push(ack.n);
  }
  const missingIn = (checkpointId: string) => missingFromCheckpoints.filter((m) => m.checkpointId === checkpointId).length;
  const missingNumbers = new Set([...missingFromCheckpoints.map((m) => m.n), ...lost]);
  const evidence =
    missingNumbers.size === 0
      ? undefined
      : {
          checkpoints: checkpoints.map((c) => ({
            ...c,
            records: contents.get(c.id)!.size,
            newest: Math.max(0, ...contents.get(c.id)!),
            missing: missingIn(c.id),
          })),
          history: session.sandboxHistory,
          acks: { first: acks[0], last: acks.at(-1) },
          missingAcks: acks.filter((a) => missingNumbers.has(a.n)).slice(0, 50),
        };
  return {
    id,
    evidence,
    acknowledged: acks.length,
    keptInCheckpoints,
    lost,
    leftOnLostNode,
    missingFromCheckpoints,
    rollbacksMs: rollbacks.filter((r) => !r.nodeLost).map((r) => r.at - r.to),
    // From the checkpoint the session moved on from to the last acknowledged write left behind.
    nodeLossWindowsMs: rollbacks.filter((r) => r.nodeLost).map((r) => Math.max(0, ...acks.filter((a) => a.at >= r.to && a.at < r.at).map((a) => a.at - r.to))),
    checkpoints: checkpoints.length,
    unreadableCheckpoints: listed.length - checkpoints.length,
    unreadable: listed.filter((c) => snapshotOf(c.id) === undefined),
    answering: live.status === 200,
    ...(live.status === 200 ? {} : { liveError: { status: live.status, body: live.body } }),
  };
}
