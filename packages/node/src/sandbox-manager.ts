import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, SpaceError, newId, type SandboxInfo, type StartSandboxRequest } from '@space/protocol';
import { SingleFlight, Upstream } from '@space/server-kit';
import type { RuntimeDriver } from './runtime/driver.js';
import { inSandbox } from './runtime/sandbox-runtime-dir.js';
import type { SandboxNetwork } from './network/sandbox-network.js';
import type { TemplateStore } from './templates/template-store.js';
import type { BtrfsVolume } from './storage/btrfs-volume.js';
import type { Subvolumes } from './storage/subvolumes.js';
import type { SandboxRecord, SandboxRecords } from './sandbox-record.js';
import type { Logger } from './logger.js';

export const daemonPort = 49983;
const daemonReadyTimeoutMs = 30_000;

/** Times the phases of a sandbox start, for the log line that says where the time went. */
class PhaseTimer {
  private readonly start = performance.now();
  private last = this.start;
  private readonly phases: string[] = [];

  mark(name: string): void {
    const now = performance.now();
    this.phases.push(`${name} ${Math.round(now - this.last)}`);
    this.last = now;
  }

  summary(): string {
    return `${Math.round(this.last - this.start)} ms (${this.phases.join(', ')})`;
  }
}

export interface SandboxManagerDeps {
  nodeId: string;
  /** Identifies this node agent in host-wide leases (its data directory). */
  owner: string;
  driver: RuntimeDriver;
  network: SandboxNetwork;
  templates: TemplateStore;
  volume: BtrfsVolume;
  subvolumes: Subvolumes;
  records: SandboxRecords;
  runtimeDir: string;
  log: Logger;
}

interface LiveSandbox {
  record: SandboxRecord;
  daemon: Upstream;
  /** Host pid of the sandbox process: its disappearance means the sandbox died. */
  pid: number | null;
}

/** The authenticated channel to a sandbox's daemon. */
function daemonOf(record: SandboxRecord): Upstream {
  return new Upstream(`http://${record.sandboxIp}:${daemonPort}`, record.token, ErrorCode.SANDBOX_UNAVAILABLE, `daemon of sandbox ${record.sandboxId}`);
}

/** Whether the daemon answers its health check within `timeoutMs`; describes why not otherwise. */
async function daemonAnswers(daemon: Upstream, timeoutMs: number): Promise<true | string> {
  try {
    const res = await daemon.send('GET', '/health', undefined, {}, timeoutMs);
    res.resume();
    return res.statusCode === 200 || `status ${res.statusCode}`;
  } catch (err) {
    return (err as Error).message;
  }
}

/** True while the process exists and is not a zombie (a killed sandbox lingers as one until reaped). */
function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Runs the sandboxes of this node: each serves one session's volume (a writable btrfs snapshot of
 * its template), in its own network namespace, with the daemon as the only way in.
 */
export class SandboxManager {
  private readonly live = new Map<string, LiveSandbox>();
  private readonly starting = new SingleFlight<SandboxInfo>();

  constructor(private readonly deps: SandboxManagerDeps) {}

  volumePath(sessionId: string): string {
    return this.deps.volume.dir('volumes', sessionId);
  }

  /** The sandbox serving a session on this node, if any. */
  liveFor(sessionId: string): LiveSandbox | undefined {
    return [...this.live.values()].find((s) => s.record.sessionId === sessionId);
  }

  /** Starts a sandbox for a session, or returns the one already serving it. */
  start(request: StartSandboxRequest): Promise<SandboxInfo> {
    const existing = this.liveFor(request.sessionId);
    if (existing) return Promise.resolve(this.describe(existing.record, true));
    return this.starting.run(request.sessionId, () => this.startNew(request));
  }

  private async startNew(request: StartSandboxRequest): Promise<SandboxInfo> {
    const { deps } = this;
    const phases = new PhaseTimer();
    const rootfs = this.volumePath(request.sessionId);
    if (!deps.subvolumes.exists(rootfs)) {
      const template = await deps.templates.ensure(request.template, (m) => deps.log.info(m));
      await deps.subvolumes.snapshot(template, rootfs, false);
    }
    phases.mark('volume');
    const sandboxId = newId('sbx');
    const token = randomBytes(32).toString('hex');
    const workDir = deps.records.workDir(sandboxId);
    await mkdir(workDir, { recursive: true, mode: 0o700 });
    const net = await deps.network.create(sandboxId, deps.owner);
    phases.mark('network');
    const record: SandboxRecord = { sandboxId, sessionId: request.sessionId, template: request.template, startedAt: new Date().toISOString(), token, leaseIndex: net.lease.index, sandboxIp: net.lease.sandboxIp };
    await deps.records.save(record);
    const tokenFile = path.join(rootfs, 'run/space/daemon-token');
    try {
      await mkdir(path.dirname(tokenFile), { recursive: true });
      await writeFile(tokenFile, token, { mode: 0o600 });
      await deps.driver.start({
        sandboxId,
        rootfs,
        workDir,
        hostname: `space-${request.sessionId.slice(4, 12)}`,
        args: [inSandbox.init, inSandbox.loader, '--library-path', inSandbox.libs, inSandbox.node, inSandbox.daemon],
        env: {
          PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
          HOME: '/root',
          LANG: 'C.UTF-8',
          SPACE_SESSION_ID: request.sessionId,
          ...request.env,
          SPACE_DAEMON_PORT: String(daemonPort),
          SPACE_DAEMON_TOKEN_FILE: '/run/space/daemon-token',
          SPACE_WORKDIR: '/workspace',
          SPACE_PTY_HELPER: inSandbox.pty,
        },
        resources: request.resources,
        runtimeDir: deps.runtimeDir,
        netnsPath: net.netnsPath,
      });
      phases.mark('runtime');
      const daemon = daemonOf(record);
      await this.waitForDaemon(sandboxId, daemon);
      this.live.set(sandboxId, { record, daemon, pid: (await deps.driver.stats(sandboxId)).pid });
      phases.mark('daemon');
      deps.log.info(`sandbox ${sandboxId} for ${request.sessionId} ready in ${phases.summary()}`);
      return this.describe(record, true);
    } catch (err) {
      const console = await readFile(path.join(workDir, 'console.log'), 'utf8').catch(() => '');
      await this.cleanup(record);
      await rm(tokenFile, { force: true });
      if (err instanceof SpaceError) throw err;
      throw new SpaceError(ErrorCode.SANDBOX_START_FAILED, `sandbox failed to start: ${(err as Error).message}${console ? `; console: ${console.slice(-1000)}` : ''}`);
    }
  }

  private async waitForDaemon(sandboxId: string, daemon: Upstream): Promise<void> {
    const deadline = Date.now() + daemonReadyTimeoutMs;
    let lastError = '';
    while (Date.now() < deadline) {
      const answer = await daemonAnswers(daemon, 1000);
      if (answer === true) return;
      lastError = answer;
      if (!(await this.deps.driver.stats(sandboxId)).running) throw new SpaceError(ErrorCode.SANDBOX_START_FAILED, 'the sandbox exited before its daemon came up');
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new SpaceError(ErrorCode.SANDBOX_START_FAILED, `daemon did not answer within ${daemonReadyTimeoutMs} ms: ${lastError}`);
  }

  get(sandboxId: string): LiveSandbox {
    const found = this.live.get(sandboxId);
    if (!found) throw new SpaceError(ErrorCode.SANDBOX_NOT_FOUND, `sandbox ${sandboxId} is not running on node ${this.deps.nodeId}`);
    return found;
  }

  /**
   * The sandbox, checked to be alive before a call is forwarded (one read of /proc/<pid>/stat).
   * A sandbox that died since its last call is cleaned up and reported as SANDBOX_NOT_FOUND: nothing
   * of the call has run, so the control plane may start a new sandbox and send it again.
   */
  async getAlive(sandboxId: string): Promise<LiveSandbox> {
    const found = this.get(sandboxId);
    if (found.pid === null || processAlive(found.pid)) return found;
    this.deps.log.warn(`sandbox ${sandboxId} of ${found.record.sessionId} died; cleaning up`);
    await this.stop(sandboxId);
    throw new SpaceError(ErrorCode.SANDBOX_NOT_FOUND, `sandbox ${sandboxId} died`);
  }

  async info(sandboxId: string): Promise<SandboxInfo> {
    const { record } = await this.getAlive(sandboxId);
    return this.describe(record, true);
  }

  list(): SandboxInfo[] {
    return [...this.live.values()].map((s) => this.describe(s.record, true));
  }

  /**
   * Called when the daemon stopped answering in the middle of a call: if the sandbox is gone, it is
   * cleaned up and reported as SANDBOX_DIED. The call may have partly run, so it is not repeated.
   */
  async checkAlive(sandboxId: string, cause: SpaceError): Promise<SpaceError> {
    const live = this.live.get(sandboxId);
    if (!live) return new SpaceError(ErrorCode.SANDBOX_DIED, `sandbox ${sandboxId} is gone`);
    const { running } = await this.deps.driver.stats(sandboxId);
    if (running) return cause;
    this.deps.log.warn(`sandbox ${sandboxId} of ${live.record.sessionId} died during a call; cleaning up`);
    await this.stop(sandboxId);
    return new SpaceError(ErrorCode.SANDBOX_DIED, `the sandbox died during this call (out of memory, pid limit, or killed); the session resumes on the next call`);
  }

  async stop(sandboxId: string): Promise<void> {
    const live = this.live.get(sandboxId);
    if (!live) return;
    this.live.delete(sandboxId);
    live.daemon.close();
    await this.cleanup(live.record);
  }

  /** Deletes a session's volume, stopping its sandbox first. */
  async deleteVolume(sessionId: string): Promise<void> {
    await this.starting.current(sessionId)?.catch(() => undefined);
    const live = this.liveFor(sessionId);
    if (live) await this.stop(live.record.sandboxId);
    await this.deps.subvolumes.delete(this.volumePath(sessionId));
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.starting.all().map((p) => p.catch(() => undefined)));
    await Promise.all([...this.live.keys()].map((id) => this.stop(id)));
  }

  /**
   * Brings the node's records, the runtime and the network into agreement after a restart or crash:
   * sandboxes still running with a reachable daemon are adopted, everything else is removed.
   */
  async reconcile(): Promise<{ adopted: number; removed: number }> {
    const { deps } = this;
    const { records, orphanDirs } = await deps.records.loadAll();
    let adopted = 0;
    let removed = 0;
    for (const record of records) {
      const daemon = daemonOf(record);
      const stats = await deps.driver.stats(record.sandboxId);
      if (stats.running && (await daemonAnswers(daemon, 2000)) === true) {
        this.live.set(record.sandboxId, { record, daemon, pid: stats.pid });
        adopted++;
      } else {
        daemon.close();
        await this.cleanup(record);
        removed++;
      }
    }
    const known = new Set(records.map((r) => r.sandboxId));
    for (const id of await deps.driver.list()) {
      if (!known.has(id)) {
        await deps.driver.destroy(id);
        removed++;
      }
    }
    for (const dir of orphanDirs) {
      await deps.network.destroy(dir, null);
      await deps.records.remove(dir);
    }
    // A restore interrupted by a crash leaves its staging copy; the volume itself is still whole.
    for (const entry of await readdir(deps.volume.dir('volumes')).catch(() => [] as string[])) {
      if (entry.endsWith('.restoring')) {
        await deps.subvolumes.delete(deps.volume.dir('volumes', entry));
        removed++;
      }
    }
    return { adopted, removed };
  }

  private async cleanup(record: SandboxRecord): Promise<void> {
    await this.deps.driver.destroy(record.sandboxId).catch((err) => this.deps.log.warn(`destroying ${record.sandboxId}: ${(err as Error).message}`));
    await this.deps.network.destroy(record.sandboxId, record.leaseIndex);
    await this.deps.records.remove(record.sandboxId);
  }

  private describe(record: SandboxRecord, running: boolean): SandboxInfo {
    return { sandboxId: record.sandboxId, sessionId: record.sessionId, nodeId: this.deps.nodeId, template: record.template, startedAt: record.startedAt, running };
  }
}
