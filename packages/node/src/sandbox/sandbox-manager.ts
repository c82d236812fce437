import {
  ErrorCode,
  SpaceError,
  anyProcessRuns,
  isSpaceError,
  type ExecResult,
  type SandboxInfo,
  type Service,
  type StartSandboxRequest,
} from '@space/protocol';
import { listProcesses, startServices, stopService } from './session-services.js';
import { type KeyedQueue, NoAnswer, processAlive } from '@space/server-kit';
import type { EgressGateway, SandboxSource } from '../gateway/egress-gateway.js';
import type { Logger } from '../logger.js';
import { CommandTimeout } from '../run-command.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { type DaemonLink, daemonAnswers } from './daemon-link.js';
import { callDaemon } from './daemon-calls.js';
import { isUnclaimed, type LiveSandbox, type LiveSandboxes } from './live-sandboxes.js';
import { PhaseTimer } from './phase-timer.js';
import type { BootOptions, SandboxBooter } from './sandbox-booter.js';
import type { SessionVolumes } from './session-volumes.js';

/** How long a daemon that did not answer a call is given to answer its health check, before it is continued and after. */
const daemonRecheckMs = 5000;
/** A daemon found not answering again within this of being continued is not continued again: its sandbox is stopped. */
const reviveAgainAfterMs = 10 * 60_000;

export interface SandboxManagerDeps {
  nodeId: string;
  driver: RuntimeDriver;
  live: LiveSandboxes;
  booter: SandboxBooter;
  link: DaemonLink;
  volumes: SessionVolumes;
  /** The node's per-session queue: a start, a volume deletion, a checkpoint and a restore of one session run one at a time. */
  sessionQueue: KeyedQueue;
  /** The node's egress gateway: holds each session's policy and secrets. */
  egress: Pick<EgressGateway, 'isConfigured' | 'removeSession'>;
  log: Logger;
}

/**
 * The sandboxes of this node: each serves one session's volume, in its own network namespace, with
 * the daemon as the only way in. Starts (decided by the SandboxStarter), stops, and the lookups that
 * check a sandbox is still alive (a full checkpoint's pause and resume are SandboxMemory's).
 */
export class SandboxManager {
  constructor(private readonly deps: SandboxManagerDeps) {}

  /** Brings a sandbox up for the session on its existing volume (booted, or restored from `options.memory`). */
  async boot(request: StartSandboxRequest, options: BootOptions = {}, phases = new PhaseTimer()): Promise<SandboxInfo> {
    const live = await this.deps.booter.boot(request, this.deps.volumes.path(request.sessionId), phases, options);
    this.deps.live.add(live);
    return this.describe(live);
  }

  /** The sandbox, or SANDBOX_NOT_FOUND (without checking it is alive: see getAlive). */
  get(sandboxId: string): LiveSandbox {
    return this.deps.live.get(sandboxId);
  }

  /** The sandbox serving a session on this node, if any. */
  forSession(sessionId: string): LiveSandbox | undefined {
    return this.deps.live.forSession(sessionId);
  }

  /**
   * The sandbox, checked to be alive before a call is forwarded (one read of /proc/<pid>/stat).
   * A sandbox that died since its last call is cleaned up and reported as SANDBOX_NOT_FOUND: nothing
   * of the call has run, so the control plane may start a new sandbox and send it again.
   */
  async getAlive(sandboxId: string): Promise<LiveSandbox> {
    const found = this.deps.live.get(sandboxId);
    if (found.pendingCall) await found.pendingCall.catch(() => undefined);
    if (found.pid === null || processAlive(found.pid)) return found;
    this.deps.log.warn(`sandbox ${sandboxId} of ${found.record.sessionId} died; cleaning up`);
    await this.stop(sandboxId);
    throw new SpaceError(ErrorCode.SANDBOX_NOT_FOUND, `sandbox ${sandboxId} died`);
  }

  async info(sandboxId: string): Promise<SandboxInfo> {
    return this.describe(await this.getAlive(sandboxId));
  }

  /** How many sandboxes serve sessions (pooled ones left out), as last seen alive: no process is looked at. */
  count(): number {
    return this.deps.live.all().filter((s) => !isUnclaimed(s.record)).length;
  }

  /** The sandboxes serving sessions whose process is alive (pooled ones waiting for a session are not listed). */
  list(): SandboxInfo[] {
    return this.deps.live
      .all()
      .filter((s) => !isUnclaimed(s.record) && (s.pid === null || processAlive(s.pid)))
      .map((s) => this.describe(s));
  }

  /**
   * Called when the daemon stopped answering in the middle of a call: if the sandbox is gone, it is
   * cleaned up and reported as SANDBOX_DIED. The call may have partly run, so it is not repeated.
   */
  async checkAlive(sandboxId: string, cause: SpaceError): Promise<SpaceError> {
    const live = this.deps.live.find(sandboxId);
    if (!live) return new SpaceError(ErrorCode.SANDBOX_DIED, `sandbox ${sandboxId} is gone`);
    const stats = await this.deps.driver.stats(sandboxId).catch((err: Error) => {
      if (err instanceof CommandTimeout) return err;
      throw err;
    });
    if (stats instanceof CommandTimeout) {
      // Neither its daemon nor its runtime answers (a wedged Sentry): it serves nothing any more.
      this.deps.log.warn(`sandbox ${sandboxId} of ${live.record.sessionId} does not answer, nor does its runtime (${stats.message}); stopping it`);
      await this.stop(sandboxId);
      return new SpaceError(
        ErrorCode.SANDBOX_DIED,
        `the sandbox stopped answering, its runtime too (${cause.message}); it was stopped and the session resumes on the next call`,
        { endReason: 'unresponsive' },
      );
    }
    if (stats.running) {
      if (cause instanceof NoAnswer) return this.reviveDaemon(live, cause);
      this.deps.log.warn(
        `sandbox ${sandboxId} runs but its daemon failed a call: ${cause.message} (${live.callsInFlight} call(s) in flight${live.pendingCall ? ', a checkpoint pending' : ''})`,
      );
      return cause;
    }
    const limit = await this.deps.driver.limitHit(sandboxId).catch(() => null);
    this.deps.log.warn(`sandbox ${sandboxId} of ${live.record.sessionId} died during a call${limit ? ` (host ${limit} limit)` : ''}; cleaning up`);
    await this.stop(sandboxId);
    const why =
      limit === 'oom'
        ? "it went past the host's memory backstop above the session's memoryMb, faster than the sandbox's own guard could stop a process"
        : limit === 'pids'
          ? "it went past the host's task limit (each process costs gVisor several host tasks)"
          : 'killed from outside, or its first process killed from inside';
    return new SpaceError(ErrorCode.SANDBOX_DIED, `the sandbox died during this call (${why}); the session resumes on the next call`, {
      endReason: limit ?? 'died',
    });
  }

  /**
   * The daemon of a running sandbox took a call and did not answer it in time: busy with it (it
   * answers its health check: the call fails, nothing else), or stopped (a process in the sandbox
   * can SIGSTOP it) or hung, when every later call would wait as long. Then it is continued (SIGCONT,
   * forwarded by the sandbox's init), once in `reviveAgainAfterMs`; if it answers its health check
   * then, the call fails and the next one is served. If not, the sandbox is stopped: the session
   * resumes at its next call.
   */
  private async reviveDaemon(live: LiveSandbox, cause: SpaceError): Promise<SpaceError> {
    const { sandboxId, sessionId } = live.record;
    if ((await daemonAnswers(live.daemon, daemonRecheckMs)) === true) {
      this.deps.log.warn(
        `sandbox ${sandboxId} of ${sessionId}: its daemon did not answer a call in time (${cause.message}) but answers its health check (busy with that call)`,
      );
      return cause;
    }
    // Continued once in a while: a process stopping it again and again (a health check may land between two stops) is not.
    const again = live.revivedAt !== undefined && Date.now() - live.revivedAt < reviveAgainAfterMs;
    const answer = again ? `continued ${Math.round((Date.now() - live.revivedAt!) / 1000)} s ago, it stopped answering again` : await this.continueDaemon(live);
    if (answer === true) {
      this.deps.log.warn(`the daemon of sandbox ${sandboxId} of ${sessionId} did not answer a call (${cause.message}); continued, it answers again`);
      return new SpaceError(
        ErrorCode.SANDBOX_UNAVAILABLE,
        `${cause.message}; the sandbox's agent answers again since it was continued (a process in the sandbox may have stopped it): this call may still be under way there`,
      );
    }
    this.deps.log.warn(`the daemon of sandbox ${sandboxId} of ${sessionId} does not answer though the sandbox runs (${answer}); stopping it`);
    // Its kernel answers: stopped, it writes what it caches of the files to the volume (pages written through a mapping too).
    await this.stop(sandboxId);
    return new SpaceError(
      ErrorCode.SANDBOX_DIED,
      `the sandbox's agent stopped answering while the sandbox ran (${cause.message}; ${answer}: hung, or stopped by a process in the sandbox?); the sandbox was stopped with its files, the session resumes on the next call`,
      { endReason: 'unresponsive' },
    );
  }

  /** Sends the sandbox's daemon SIGCONT (through its init); whether it answers then, or why not. */
  private async continueDaemon(live: LiveSandbox): Promise<true | string> {
    const { sandboxId } = live.record;
    live.revivedAt = Date.now();
    await this.deps.driver.signalInit(sandboxId, 'SIGCONT').catch((err: Error) => this.deps.log.warn(`continuing the daemon of ${sandboxId}: ${err.message}`));
    return daemonAnswers(live.daemon, daemonRecheckMs);
  }

  /** Starts the session's services in its sandbox (one that did not restore the session's processes); what failed to start. */
  async startServices(sandboxId: string, services: Service[]): Promise<string[]> {
    const live = this.deps.live.get(sandboxId);
    const leave = live.entries.enter();
    try {
      return await startServices(this.deps.link, live, services, this.deps.log);
    } finally {
      leave();
    }
  }

  /** Whether any process runs in the session's sandbox besides its init and daemon; a daemon that cannot say counts as yes. */
  async runsProcesses(live: LiveSandbox): Promise<boolean> {
    const list = await listProcesses(this.deps.link, live).catch(() => null);
    return !list || list.untracked === undefined || anyProcessRuns(list);
  }

  /** Stops a service running in the sandbox (its supervisor and what it runs); false when none runs. */
  async stopService(sandboxId: string, name: string): Promise<boolean> {
    return stopService(this.deps.link, await this.getAlive(sandboxId), name);
  }

  /** Runs a short command of the node's own in the sandbox (reading /proc), through its daemon. */
  run(live: LiveSandbox, cmd: string[]): Promise<ExecResult> {
    return this.deps.link.run(live.daemon, cmd);
  }

  /** Flushes the running sandbox's writes to its volume (gVisor keeps file data in the Sentry until synced). */
  async flushWrites(sessionId: string): Promise<void> {
    const live = this.deps.live.forSession(sessionId);
    if (live) await this.callAlive(live, () => this.deps.link.sync(live.daemon));
  }

  /**
   * Runs `work`, a call to the sandbox's daemon, cut if the sandbox dies meanwhile (`callDaemon`): a
   * sandbox killed during the call never answers. One that failed because the sandbox died cleans it
   * up and fails as SANDBOX_DIED: the session resumes on its next call.
   */
  async callAlive<T>(live: LiveSandbox, work: () => Promise<T>): Promise<T> {
    try {
      return await callDaemon(live, work);
    } catch (err) {
      throw isSpaceError(err) && err.code === ErrorCode.SANDBOX_UNAVAILABLE ? await this.checkAlive(live.record.sandboxId, err) : err;
    }
  }

  async stop(sandboxId: string): Promise<void> {
    const live = this.deps.live.remove(sandboxId);
    if (!live) return;
    live.daemon.close();
    live.inbound.close();
    await this.deps.booter.teardown(live.record);
  }

  /** Stops a sandbox on request (the session stays), in its session's turn: never in the middle of its checkpoint. */
  async kill(sandboxId: string): Promise<void> {
    const live = this.deps.live.find(sandboxId);
    if (live) await this.deps.sessionQueue.run(live.record.sessionId, () => this.stop(sandboxId));
  }

  /** Deletes a session's volume, stopping its sandbox first. */
  deleteVolume(sessionId: string): Promise<void> {
    return this.deps.sessionQueue.run(sessionId, async () => {
      const live = this.deps.live.forSession(sessionId);
      if (live) await this.stop(live.record.sandboxId);
      await this.deps.volumes.delete(sessionId);
      await this.deps.egress.removeSession(sessionId);
    });
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.deps.live.ids().map((id) => this.stop(id)));
  }

  /** The sandbox (and session) a packet from `ip` comes from, for the gateway. */
  sourceOf(ip: string): SandboxSource | null {
    const live = this.deps.live.atAddress(ip);
    return live ? { sandboxId: live.record.sandboxId, sessionId: live.record.sessionId } : null;
  }

  /** Sessions with a running sandbox here whose egress settings the gateway lacks (after a restart). */
  egressUnconfigured(): string[] {
    return this.deps.live
      .all()
      .filter((l) => !isUnclaimed(l.record) && !this.deps.egress.isConfigured(l.record.sessionId))
      .map((l) => l.record.sessionId);
  }

  describe(live: LiveSandbox): SandboxInfo {
    const { record } = live;
    return {
      sandboxId: record.sandboxId,
      sessionId: record.sessionId,
      nodeId: this.deps.nodeId,
      template: record.template,
      startedAt: record.startedAt,
      running: true,
      restoredFrom: record.restoredFrom ?? null,
      note: record.note ?? null,
      quietSince: live.entries.quietSince(),
    };
  }
}
