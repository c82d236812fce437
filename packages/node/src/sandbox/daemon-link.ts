import {
  BackgroundStartedSchema,
  DaemonMemoryReliefSchema,
  DaemonQuiesceReplySchema,
  ErrorCode,
  ExecResultSchema,
  OkSchema,
  ProcessListSchema,
  SandboxLayout,
  SpaceError,
  type DaemonMemoryRelief,
  type ExecResult,
  type ProcessList,
  type SandboxIdentity,
} from '@space/protocol';
import { Upstream } from '@space/server-kit';
import type { RuntimeDriver } from '../runtime/driver.js';

const daemonReadyTimeoutMs = 30_000;
/** How long the node's own short calls (a process list, a signal) may take: a daemon that does not answer by then is not waited for. */
const shortCallTimeoutMs = 10_000;

/** What a daemon restored from an image or taken from the pool learns when it starts serving a session. */
export interface Rebinding {
  /** Its new channel token. */
  token: string;
  /** The session's environment for the processes it starts from now on. */
  env: Record<string, string>;
  /** Where they run without a cwd (the template's WORKDIR); "" for the workspace. */
  cwd: string;
  /** A new hostname and machine id; none for a pooled sandbox (it keeps its own). */
  identity?: SandboxIdentity;
  /** The memory is another session's or none's: the daemon forgets the processes that finished there. */
  newSession: boolean;
  /** The channel is thrown away right after: its connection is reset, leaving nothing in the sandbox. */
  resetAfter?: boolean;
}

/** Whether the daemon answers its health check within `timeoutMs`; describes why not otherwise. */
export async function daemonAnswers(daemon: Upstream, timeoutMs: number): Promise<true | string> {
  try {
    const res = await daemon.send('GET', '/health', undefined, {}, timeoutMs);
    res.resume();
    return res.statusCode === 200 || `status ${res.statusCode}`;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * The node's link to a sandbox's daemon, the only way into the sandbox: the authenticated channel,
 * readiness, rebinding, and the quiesce/wake pair around a full checkpoint or a restore.
 */
export class DaemonLink {
  constructor(private readonly driver: RuntimeDriver) {}

  /** An authenticated channel to the daemon of the sandbox at `sandboxIp`. */
  connect(sandboxId: string, sandboxIp: string, token: string): Upstream {
    return new Upstream(
      `http://${sandboxIp}:${SandboxLayout.daemonPort}`,
      token,
      ErrorCode.SANDBOX_UNAVAILABLE,
      `daemon of sandbox ${sandboxId}`,
      undefined,
      {},
      'space-agent',
    );
  }

  /** Waits until the daemon answers; fails early when the sandbox exits. */
  async waitReady(sandboxId: string, daemon: Upstream): Promise<void> {
    const deadline = Date.now() + daemonReadyTimeoutMs;
    let lastError = '';
    while (Date.now() < deadline) {
      const answer = await daemonAnswers(daemon, 1000);
      if (answer === true) return;
      lastError = answer;
      if (!(await this.driver.stats(sandboxId)).running) throw new SpaceError(ErrorCode.SANDBOX_START_FAILED, 'the sandbox exited before its daemon came up');
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new SpaceError(ErrorCode.SANDBOX_START_FAILED, `daemon did not answer within ${daemonReadyTimeoutMs} ms: ${lastError}`);
  }

  /** Makes the daemon serve a session (a restored or pooled sandbox): new token, environment, identity. */
  rebind(daemon: Upstream, rebinding: Rebinding): Promise<unknown> {
    const { token, env, cwd, identity, newSession, resetAfter = false } = rebinding;
    return daemon.json('POST', '/rebind', { token, env, cwd, identity, newSession }, OkSchema, { timeoutMs: 10_000, resetAfter });
  }

  /**
   * Makes the daemon close its channel before the runtime saves the sandbox (this runsc cannot save
   * TCP endpoints): the asking connection is released by the daemon before this returns, the others
   * are reset from both sides.
   */
  async quiesce(daemon: Upstream): Promise<void> {
    await daemon.json('POST', '/quiesce', {}, DaemonQuiesceReplySchema, { timeoutMs: 10_000, awaitPeerClose: true });
    daemon.reset();
  }

  /** Tells a daemon whose channel is closed (after a checkpoint or a restore) to listen again, through the sandbox's init (SIGUSR2). */
  async wake(sandboxId: string): Promise<void> {
    await this.driver.signalInit(sandboxId, 'SIGUSR2');
  }

  /** Asks the daemon's memory guard to kill the biggest process if the sandbox's memory is used up. */
  relieveMemory(daemon: Upstream): Promise<DaemonMemoryRelief> {
    return daemon.json('POST', '/relieve-memory', {}, DaemonMemoryReliefSchema, { timeoutMs: 2_000 });
  }

  /** Makes the sandbox kernel write its cached file data to the volume (before an fs checkpoint). */
  async sync(daemon: Upstream): Promise<void> {
    await daemon.json('POST', '/sync', {}, OkSchema, { timeoutMs: 35_000 });
  }

  /** Starts a background process through the daemon; its pid. */
  async startBackground(daemon: Upstream, request: { cmd: string[]; env?: Record<string, string>; cwd?: string }): Promise<number> {
    return (await daemon.json('POST', '/exec', { ...request, background: true }, BackgroundStartedSchema, { timeoutMs: 35_000 })).pid;
  }

  /** The processes the daemon lists (with the count of those it did not start). */
  processes(daemon: Upstream): Promise<ProcessList> {
    return daemon.json('GET', '/processes', undefined, ProcessListSchema, { timeoutMs: shortCallTimeoutMs });
  }

  /** Sends `signal` to the process `pid` of the sandbox. */
  async signal(daemon: Upstream, pid: number, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    await daemon.json('POST', `/processes/${pid}/signal`, { signal }, OkSchema, { timeoutMs: shortCallTimeoutMs });
  }

  /** Runs `cmd` through the daemon and waits for it (warming process spawning, reading /proc). */
  run(daemon: Upstream, cmd: string[]): Promise<ExecResult> {
    return daemon.json('POST', '/exec', { cmd, timeoutMs: 30_000 }, ExecResultSchema, { timeoutMs: 35_000 });
  }
}
