import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Api, type ApiReply } from '../client.js';
import { sandboxHostPid } from '../host-state.js';
import { startPlatform, testDataDir, type RunningPlatform } from '../platform.js';
import { Random } from './random.js';

export interface ChaosOptions {
  sessions: number;
  /** SIGKILLs of a random session's sandbox from outside (as an OOM kill or a crash would). */
  sandboxKills: number;
  /** SIGKILLs of the whole platform (node agent and control plane), each followed by a restart. */
  platformKills: number;
  /** Mean time between two faults, ms (each wait is 0.5–1.5 times it). */
  faultIntervalMs: number;
  seed: number;
  dataDir?: string;
  log?: (line: string) => void;
  /** Gets each platform process's whole log when it ends (killed or stopped). */
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
  /** (record, checkpoint) pairs where the record was acknowledged before the checkpoint on the same timeline and is not in it. */
  missingFromCheckpoints: { n: number; checkpointId: string }[];
  /** How far back each resume from a full checkpoint took the files, ms (what it wrote since is in a `resume` checkpoint). */
  rollbacksMs: number[];
  checkpoints: number;
  answering: boolean;
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
  durationMs: number;
  sessions: number;
  sandboxKills: number;
  platformKills: number;
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
  /** The largest rollback of any resume, ms: the files of that window are in a `resume` checkpoint, not in the live volume. */
  maxRollbackMs: number;
  rollbacks: number;
  sessionsAnswering: number;
  accounts: SessionAccount[];
}

/** A write with no answer by then is counted as stuck and given up on, so one hung call cannot stall the run (undici would wait 300 s). */
const callTimeoutMs = 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A chaos run: busy sessions append numbered records through the API (each acknowledged when its
 * call returns), while sandboxes are SIGKILLed from outside and the whole platform is SIGKILLed and
 * restarted at random moments. Then every acknowledged record is accounted for against the live
 * files and every checkpoint (read from the host's btrfs snapshots), and every session must answer.
 * Bounded: it ends after its faults.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const rng = new Random(options.seed);
  const log = options.log ?? (() => undefined);
  const dataDir = options.dataDir ?? testDataDir;
  const adminKey = `chaos-${process.pid}-${options.seed}`;
  // The platform logs everything only when someone reads it.
  const env = { SPACE_MAINTENANCE_TICK_MS: '1000', ...(options.platformLog ? { SPACE_QUIET: '0' } : {}) };
  let platform: RunningPlatform = await startPlatform({ dataDir, adminKey, env });
  const started = performance.now();
  // The platform's address changes with each restart.
  const call = (method: string, p: string, body?: unknown): Promise<ApiReply> => new Api(platform.url, adminKey).call(method, p, body);
  const ids: string[] = [];
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
        const reply = await new Api(platform.url, adminKey)
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

    const faults = [...Array<'sandbox'>(options.sandboxKills).fill('sandbox'), ...Array<'platform'>(options.platformKills).fill('platform')];
    rng.shuffle(faults);
    /** SIGKILLs the sandbox of a random session; a session without one (being resumed) gives its turn to another, three tries. */
    const killSomeSandbox = async (): Promise<boolean> => {
      for (let attempt = 0; attempt < 3; attempt++) {
        const sandbox = (await call('GET', `/v1/sessions/${rng.pick(ids)}`).catch(() => null))?.body?.sandbox;
        if (!sandbox) continue;
        try {
          process.kill(sandboxHostPid(dataDir, sandbox.id), 'SIGKILL');
          return true;
        } catch {
          // The sandbox ended meanwhile (a resume, a restore).
        }
      }
      return false;
    };
    let sandboxKills = 0;
    let platformKills = 0;
    for (const fault of faults) {
      if (options.signal?.aborted) break;
      await sleep(rng.int(options.faultIntervalMs / 2, (options.faultIntervalMs * 3) / 2));
      if (fault === 'platform') {
        platform.process.kill('SIGKILL');
        await new Promise((resolve) => (platform.process.exitCode !== null ? resolve(null) : platform.process.once('exit', resolve)));
        options.platformLog?.(platform.output());
        platformKills++;
        log(`chaos: platform SIGKILLed (${platformKills}/${options.platformKills}); restarting`);
        platform = await startPlatform({ dataDir, adminKey, env });
        continue;
      }
      if (await killSomeSandbox()) sandboxKills++;
    }
    stopped = true;
    await Promise.all(writers);

    const accounts: SessionAccount[] = [];
    for (const id of ids) accounts.push(await account(id, acks.get(id)!, call, dataDir));
    const sum = (f: (a: SessionAccount) => number) => accounts.reduce((total, a) => total + f(a), 0);
    return {
      seed: options.seed,
      durationMs: Math.round(performance.now() - started),
      sessions: ids.length,
      sandboxKills,
      platformKills,
      acknowledged: sum((a) => a.acknowledged),
      failedCalls,
      stuckCalls,
      checkpoints: sum((a) => a.checkpoints),
      missingFromCheckpoints: sum((a) => a.missingFromCheckpoints.length),
      lost: sum((a) => a.lost.length),
      keptOnlyInCheckpoints: sum((a) => a.keptInCheckpoints),
      maxRollbackMs: Math.max(0, ...accounts.flatMap((a) => a.rollbacksMs)),
      rollbacks: sum((a) => a.rollbacksMs.length),
      sessionsAnswering: sum((a) => (a.answering ? 1 : 0)),
      accounts,
    };
  } finally {
    for (const id of ids) await call('DELETE', `/v1/sessions/${id}`).catch(() => undefined);
    await platform.stop();
    options.platformLog?.(platform.output());
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
  dataDir: string,
): Promise<SessionAccount> {
  const live = await call('POST', `/v1/sessions/${id}/exec`, { cmd: 'cat /workspace/log' });
  const session = (await call('GET', `/v1/sessions/${id}`)).body;
  const checkpoints: { id: string; kind: string; trigger: string; createdAt: string }[] = (await call('GET', `/v1/sessions/${id}/checkpoints`)).body
    .checkpoints;
  const checkpointTimes = new Map(checkpoints.map((c) => [c.id, Date.parse(c.createdAt)]));
  const contents = new Map(
    checkpoints.map((c) => {
      const file = path.join(dataDir, 'btrfs/checkpoints', c.id, 'workspace/log');
      return [c.id, existsSync(file) ? records(readFileSync(file, 'utf8')) : new Set<number>()];
    }),
  );
  // Each rollback: when the volume went back, and to which moment (the restored checkpoint's time).
  // A restore whose memory image failed still put the files back: its note says so.
  const rollbacks = (session.sandboxHistory as { startedAt: string; restoredFrom: string | null; note: string | null }[])
    .map((h) => ({ at: Date.parse(h.startedAt), to: h.restoredFrom ?? /went back to (ckp_\w+)/.exec(h.note ?? '')?.[1] }))
    .filter((r): r is { at: number; to: string } => r.to !== undefined && checkpointTimes.has(r.to))
    .map((r) => ({ at: r.at, to: checkpointTimes.get(r.to)! }));
  const survives = (ack: Ack, until: number) => rollbacks.every((r) => r.at <= ack.at || r.at >= until || ack.at < r.to);

  const liveRecords = live.status === 200 ? records(live.body.stdout) : new Set<number>();
  const missingFromCheckpoints: SessionAccount['missingFromCheckpoints'] = [];
  const lost: number[] = [];
  let keptInCheckpoints = 0;
  for (const ack of acks) {
    for (const c of checkpoints) {
      const takenAt = checkpointTimes.get(c.id)!;
      if (ack.at < takenAt && survives(ack, takenAt) && !contents.get(c.id)!.has(ack.n)) missingFromCheckpoints.push({ n: ack.n, checkpointId: c.id });
    }
    if (liveRecords.has(ack.n)) continue;
    if ([...contents.values()].some((set) => set.has(ack.n))) keptInCheckpoints++;
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
    missingFromCheckpoints,
    rollbacksMs: rollbacks.map((r) => r.at - r.to),
    checkpoints: checkpoints.length,
    answering: live.status === 200,
  };
}
