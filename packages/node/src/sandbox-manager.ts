import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { DaemonQuiesceReplySchema, ErrorCode, ExecResultSchema, OkSchema, SpaceError, newId, type Resources, type SandboxIdentity, type SandboxInfo, type StartSandboxRequest } from '@space/protocol';
import { SingleFlight, Upstream, type KeyedQueue } from '@space/server-kit';
import { z } from 'zod';
import type { RuntimeDriver } from './runtime/driver.js';
import { inSandbox, installCompatPreload } from './runtime/sandbox-runtime-dir.js';
import type { SandboxNetwork } from './network/sandbox-network.js';
import type { TemplateStore } from './templates/template-store.js';
import type { BtrfsVolume } from './storage/btrfs-volume.js';
import type { Subvolumes } from './storage/subvolumes.js';
import type { SandboxRecord, SandboxRecords } from './sandbox-record.js';
import type { Logger } from './logger.js';
import type { CheckpointStore, MemoryImageMeta } from './storage/checkpoint-store.js';
import type { SandboxSpec } from './runtime/driver.js';
import { readJsonFile } from './json-file.js';
import type { WarmPool } from './warm-pool.js';
import type { TemplateImage } from './template-images.js';
import type { EgressGateway, SandboxSource } from './gateway/egress-gateway.js';
import { installGatewayTrust, trustEnv } from './gateway/sandbox-trust.js';
import { writeInsideVolume } from './runtime/volume-paths.js';

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

  elapsed(): number {
    return performance.now() - this.start;
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
  checkpoints: CheckpointStore;
  runtimeDir: string;
  /** The node's egress gateway: holds each session's policy and secrets. */
  egress: Pick<EgressGateway, 'configure' | 'isConfigured' | 'removeSession'>;
  /** The cluster's gateway CA certificate, installed in every new volume. */
  gatewayCaPem: string;
  /** The node's per-session queue: a start, a volume deletion, a checkpoint and a restore of one session run one at a time. */
  sessionQueue: KeyedQueue;
  log: Logger;
}

interface LiveSandbox {
  record: SandboxRecord;
  daemon: Upstream;
  /** Host pid of the sandbox process: its disappearance means the sandbox died. */
  pid: number | null;
  /** Set while a full checkpoint has the sandbox paused; calls wait for it. */
  frozen: Promise<unknown> | null;
}

/** What a full checkpoint of a running sandbox produced, besides the image files. */
export interface MemoryCheckpoint {
  meta: Omit<MemoryImageMeta, 'sizeBytes'>;
  pauseMs: number;
}

/** CPU weights (cgroup cpu.shares): pooled sandboxes wait at the lowest until a session claims them. */
const defaultCpuShares = 1024;
const poolCpuShares = 2;

/** Pooled sandboxes serve a placeholder "session" with this prefix until claimed. */
const unclaimedPrefix = 'pool';
const isUnclaimed = (record: SandboxRecord): boolean => record.sessionId.startsWith(`${unclaimedPrefix}_`);

/**
 * A memory image a session's next sandbox starts from (set by a restore or fork from a full
 * checkpoint); `newSession` when the volume was made for this session from another's checkpoint.
 */
const PendingMemorySchema = z.object({ checkpointId: z.string(), newSession: z.boolean().default(false) }).strict();

/** A memory image a sandbox is restored from: a full checkpoint's, or a template's (checkpointId null). */
interface MemorySource {
  checkpointId: string | null;
  /** For the log: what the image is. */
  label: string;
  dir: string;
  meta: Omit<MemoryImageMeta, 'sizeBytes'>;
  /** The image's memory is another session's (fork) or none's (template): the sandbox gets a new machine id. */
  newSession: boolean;
}

/** The hostname of a session's booted or restored sandboxes, from the session id (a pooled one keeps its own). */
function hostnameOf(sessionId: string): string {
  return `space-${sessionId.split('_')[1]!.slice(0, 8)}`;
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

/**
 * Gives a daemon its (new) channel token, session environment and identity: a restored or pooled
 * sandbox starts serving a session. `resetAfter` for a channel that is thrown away right after.
 */
function rebind(daemon: Upstream, token: string, env: Record<string, string>, identity: SandboxIdentity | undefined, newSession: boolean, resetAfter = false): Promise<unknown> {
  return daemon.json('POST', '/rebind', { token, env, identity, newSession }, OkSchema, { timeoutMs: 10_000, resetAfter });
}

/** A new /etc/machine-id value. */
function newMachineId(): string {
  return randomBytes(16).toString('hex');
}

/** What a session adds to its sandbox's environment: its id, then its own variables. */
function sessionEnvOf(request: StartSandboxRequest): Record<string, string> {
  return { SPACE_SESSION_ID: request.sessionId, ...request.env };
}

/** The end of a sandbox's console output (runsc's and the daemon's), for error messages. */
async function consoleTail(workDir: string, chars: number): Promise<string> {
  return (await readFile(path.join(workDir, 'console.log'), 'utf8').catch(() => '')).slice(-chars);
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
  private pool: WarmPool | null = null;
  /** Sandboxes started for sessions, by how (for /metrics: how often the pool and the images serve). */
  private readonly starts: Record<'pool' | 'template-image' | 'checkpoint' | 'boot', number> = { pool: 0, 'template-image': 0, checkpoint: 0, boot: 0 };

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
    // The gateway knows the session's policy and secrets before its sandbox can send anything.
    this.deps.egress.configure(request.sessionId, request.egress);
    const existing = this.liveFor(request.sessionId);
    if (existing) return Promise.resolve(this.describe(existing.record, true));
    return this.starting.run(request.sessionId, () =>
      this.deps.sessionQueue.run(request.sessionId, async () => {
        // Looked up again in the queue: a start before this one may have finished meanwhile.
        const started = this.liveFor(request.sessionId);
        return started ? this.describe(started.record, true) : this.startNew(request);
      }),
    );
  }

  /** Flushes the running sandbox's writes to its volume (gVisor keeps file data in the Sentry until synced). */
  async flushWrites(sessionId: string): Promise<void> {
    const live = this.liveFor(sessionId);
    if (live) await live.daemon.json('POST', '/exec', { cmd: ['sync'], timeoutMs: 30_000 }, ExecResultSchema, { timeoutMs: 35_000 });
  }

  poolSizes(): Record<string, number> {
    return this.pool?.sizes() ?? {};
  }

  startCounts(): Record<string, number> {
    return { ...this.starts };
  }

  templateImages(): string[] {
    return this.pool?.imagesReady() ?? [];
  }

  /** Where new sessions get a ready sandbox from; set once by the node agent. */
  usePool(pool: WarmPool): void {
    this.pool = pool;
  }

  private async startNew(request: StartSandboxRequest): Promise<SandboxInfo> {
    const { deps } = this;
    const phases = new PhaseTimer();
    const rootfs = this.volumePath(request.sessionId);
    if (!deps.subvolumes.exists(rootfs)) {
      // A new session: a pooled sandbox serves it at once if one fits; else the template's image.
      const pooled = await this.pool?.take(request);
      if (pooled) return this.counted('pool', pooled);
      const image = this.pool?.image(request);
      if (image) {
        const restored = await this.startFromTemplateImage(request, rootfs, image, phases);
        if (restored) return this.counted('template-image', restored);
      }
      await this.newVolume(request.template, rootfs);
    }
    const memory = await this.takePendingMemory(request.sessionId);
    phases.mark('volume');
    if (memory) {
      try {
        return this.counted('checkpoint', await this.boot(request, rootfs, phases, memory));
      } catch (err) {
        // The volume already holds the checkpoint's files: a fresh boot on it loses only the processes.
        deps.log.warn(`restoring ${request.sessionId} from ${memory.label} failed, booting fresh instead: ${(err as Error).message}`);
      }
    }
    return this.counted('boot', await this.boot(request, rootfs, phases, null));
  }

  private counted(origin: keyof SandboxManager['starts'], info: SandboxInfo): SandboxInfo {
    this.starts[origin]++;
    return info;
  }

  /**
   * Snapshot preloading: the session's volume is a writable snapshot of the image's, and its sandbox
   * is restored from the image's memory (daemon already up). Null if that fails: nothing is left.
   */
  private async startFromTemplateImage(request: StartSandboxRequest, rootfs: string, image: TemplateImage, phases: PhaseTimer): Promise<SandboxInfo | null> {
    await this.deps.subvolumes.snapshot(image.rootfs, rootfs, false);
    phases.mark('volume');
    try {
      return await this.boot(request, rootfs, phases, { checkpointId: null, label: `the ${image.template} template's image`, dir: image.memoryDir, meta: image.meta, newSession: true });
    } catch (err) {
      this.deps.log.warn(`restoring ${request.sessionId} from the ${image.template} template's image failed, booting instead: ${(err as Error).message}`);
      await this.deps.subvolumes.delete(rootfs);
      return null;
    }
  }

  /** Starts a sandbox on the session's volume: booted fresh, or restored from a memory image. */
  private async boot(request: StartSandboxRequest, rootfs: string, phases: PhaseTimer, memory: MemorySource | null, cpuShares?: number): Promise<SandboxInfo> {
    const { deps } = this;
    const sandboxId = newId('sbx');
    const token = randomBytes(32).toString('hex');
    const workDir = deps.records.workDir(sandboxId);
    await mkdir(workDir, { recursive: true, mode: 0o700 });
    const net = await deps.network.create(sandboxId, deps.owner);
    phases.mark('network');
    const record: SandboxRecord = { sandboxId, sessionId: request.sessionId, template: request.template, startedAt: new Date().toISOString(), token, leaseIndex: net.lease.index, sandboxIp: net.lease.sandboxIp, restoredFrom: memory?.checkpointId ?? null, fromImage: memory !== null };
    await deps.records.save(record);
    const tokenFile = path.join(rootfs, 'run/space/daemon-token');
    const sessionEnv = sessionEnvOf(request);
    const spec: SandboxSpec = {
      sandboxId,
      rootfs,
      workDir,
      hostname: hostnameOf(request.sessionId),
      args: [inSandbox.init, inSandbox.loader, '--library-path', inSandbox.libs, inSandbox.node, inSandbox.daemon],
      env: {
        PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        HOME: '/root',
        LANG: 'C.UTF-8',
        ...trustEnv,
        ...sessionEnv,
        SPACE_DAEMON_PORT: String(daemonPort),
        SPACE_DAEMON_TOKEN_FILE: '/run/space/daemon-token',
        SPACE_WORKDIR: '/workspace',
        SPACE_PTY_HELPER: inSandbox.pty,
      },
      resources: request.resources,
      runtimeDir: deps.runtimeDir,
      netnsPath: net.netnsPath,
      cpuShares,
    };
    try {
      if (memory) {
        await deps.driver.restore(spec, memory.dir);
        phases.mark('restore');
        // The restored daemon still has the checkpointed sandbox's token, session and hostname: wake it, then rebind.
        await this.wake(sandboxId);
        const restored = daemonOf({ ...record, token: memory.meta.token });
        await this.waitForDaemon(sandboxId, restored);
        const identity: SandboxIdentity = { hostname: hostnameOf(request.sessionId), ...(memory.newSession ? { machineId: newMachineId() } : {}) };
        await rebind(restored, token, sessionEnv, identity, memory.newSession, true);
        restored.close();
      } else {
        // The volume is the session's: a link it left at run/ or run/space must not send this write elsewhere.
        await writeInsideVolume(rootfs, 'run/space/daemon-token', token, 0o600);
        await deps.driver.start(spec);
        phases.mark('runtime');
      }
      const daemon = daemonOf(record);
      await this.waitForDaemon(sandboxId, daemon);
      this.live.set(sandboxId, { record, daemon, pid: (await deps.driver.stats(sandboxId)).pid, frozen: null });
      phases.mark('daemon');
      deps.log.info(`sandbox ${sandboxId} for ${request.sessionId} ${memory ? `restored from ${memory.label}` : 'ready'} in ${phases.summary()}`);
      return this.describe(record, true);
    } catch (err) {
      const console = await consoleTail(workDir, 1000);
      await this.cleanup(record);
      await rm(tokenFile, { force: true });
      if (err instanceof SpaceError) throw err;
      throw new SpaceError(ErrorCode.SANDBOX_START_FAILED, `sandbox failed to start: ${(err as Error).message}${console ? `; console: ${console}` : ''}`);
    }
  }

  /** A writable snapshot of the template with an identity of its own (a new /etc/machine-id), trusting the gateway, with space-compat preloaded. */
  private async newVolume(templateName: string, rootfs: string): Promise<void> {
    const template = await this.deps.templates.ensure(templateName, (m) => this.deps.log.info(m));
    await this.deps.subvolumes.snapshot(template, rootfs, false);
    if (existsSync(path.join(rootfs, 'etc'))) await writeFile(path.join(rootfs, 'etc/machine-id'), `${newMachineId()}\n`, { mode: 0o444 });
    await installGatewayTrust(rootfs, this.deps.gatewayCaPem);
    await installCompatPreload(rootfs);
  }

  /** Boots a sandbox for the warm pool: its own volume, named like a session that does not exist. */
  async bootUnclaimed(template: string, resources: Resources): Promise<string> {
    const poolId = newId(unclaimedPrefix);
    const rootfs = this.volumePath(poolId);
    await this.newVolume(template, rootfs);
    try {
      // Booted at the lowest CPU weight, so refilling yields to running sandboxes; a throwaway
      // exec warms the daemon's process spawning, which is slow the first time in a new sandbox.
      // No egress settings until claimed: the gateway answers an unclaimed sandbox with 503.
      const unclaimed: StartSandboxRequest = { sessionId: poolId, template, env: {}, resources, egress: { policy: { mode: 'deny-all', domains: [], cidrs: [] }, secrets: [] } };
      const { sandboxId } = await this.boot(unclaimed, rootfs, new PhaseTimer(), null, poolCpuShares);
      await this.get(sandboxId).daemon.json('POST', '/exec', { cmd: ['true'], timeoutMs: 30_000 }, ExecResultSchema, { timeoutMs: 35_000 });
      return sandboxId;
    } catch (err) {
      await this.deps.subvolumes.delete(rootfs);
      throw err;
    }
  }

  /**
   * A template's image for snapshot preloading: a sandbox booted like a pooled one (daemon up and
   * warmed), its daemon's channel closed, saved by the runtime (which stops it), and its volume kept
   * as a read-only snapshot matching the memory. The sandbox and its volume are removed afterwards.
   */
  async captureTemplateImage(template: string, resources: Resources, target: { rootfs: string; memoryDir: string }): Promise<Omit<MemoryImageMeta, 'sizeBytes'>> {
    const { deps } = this;
    const sandboxId = await this.bootUnclaimed(template, resources);
    const live = this.get(sandboxId);
    try {
      await this.quiesce(live);
      await deps.driver.checkpoint(sandboxId, target.memoryDir);
      await deps.subvolumes.snapshot(this.volumePath(live.record.sessionId), target.rootfs, true);
      return { token: live.record.token, runtimeDir: deps.runtimeDir };
    } finally {
      await this.discard(sandboxId);
    }
  }

  /**
   * Hands a pooled sandbox to a session: its volume is renamed to the session's (the running
   * sandbox keeps its open directories), and the daemon gets the session's environment.
   */
  async claim(sandboxId: string, request: StartSandboxRequest): Promise<SandboxInfo> {
    const { deps } = this;
    const phases = new PhaseTimer();
    const live = await this.getAlive(sandboxId);
    const workDir = deps.records.workDir(sandboxId);
    const from = this.volumePath(live.record.sessionId);
    const to = this.volumePath(request.sessionId);
    await deps.driver.setCpuShares(sandboxId, workDir, defaultCpuShares);
    await deps.subvolumes.rename(from, to);
    await deps.driver.moveRootfs(workDir, from, to);
    live.record = { ...live.record, sessionId: request.sessionId, startedAt: new Date().toISOString() };
    await deps.records.save(live.record);
    phases.mark('claim');
    // The daemon learns the session's environment in the background (a round trip into gVisor costs
    // more than the rest of the claim); calls on the sandbox wait for it like for a checkpoint. If it
    // fails, the sandbox is stopped and the session's next call boots a new one on its volume. The
    // sandbox keeps the hostname it booted with (unique to it): renaming it to the session's added
    // ~40 ms to the first call and ~0.4 s to a burst of 20 creates (measured).
    const rebound = rebind(live.daemon, live.record.token, sessionEnvOf(request), undefined, true)
      .then(() => deps.log.info(`pooled sandbox ${sandboxId} claimed by ${request.sessionId} in ${phases.summary()}, rebound ${Math.round(phases.elapsed())} ms after the claim began`))
      .catch(async (err: Error) => {
        deps.log.warn(`pooled sandbox ${sandboxId} did not take the environment of ${request.sessionId}, stopping it: ${err.message}`);
        await this.stop(sandboxId);
      })
      .finally(() => {
        if (live.frozen === rebound) live.frozen = null;
      });
    live.frozen = rebound;
    return this.describe(live.record, true);
  }

  /** Resolves when the sandbox's pending daemon call (a claim's rebind) is over, however it ended. */
  async settled(sandboxId: string): Promise<void> {
    await this.live.get(sandboxId)?.frozen?.catch(() => undefined);
  }

  /** Stops an unclaimed sandbox and deletes its volume. */
  async discard(sandboxId: string): Promise<void> {
    const live = this.live.get(sandboxId);
    if (!live) return;
    await this.stop(sandboxId);
    await this.deps.subvolumes.delete(this.volumePath(live.record.sessionId));
  }

  private pendingMemoryFile(sessionId: string): string {
    return `${this.volumePath(sessionId)}.memory-from`;
  }

  /**
   * Makes the session's next sandbox start from a full checkpoint's memory (or not, with null);
   * `newSession` when the session did not exist before (a fork): its sandbox gets a new machine id.
   */
  async setPendingMemory(sessionId: string, checkpointId: string | null, newSession = false): Promise<void> {
    const file = this.pendingMemoryFile(sessionId);
    if (checkpointId === null) await rm(file, { force: true });
    else await writeFile(file, JSON.stringify({ checkpointId, newSession }), { mode: 0o600 });
  }

  volumeExists(sessionId: string): boolean {
    return this.deps.subvolumes.exists(this.volumePath(sessionId));
  }

  /** The memory image the session's next sandbox should start from, if one is pending and usable; consumed. */
  private async takePendingMemory(sessionId: string): Promise<MemorySource | null> {
    const file = this.pendingMemoryFile(sessionId);
    if (!existsSync(file)) return null;
    const pending = await readJsonFile(file, PendingMemorySchema);
    await this.setPendingMemory(sessionId, null);
    if (!pending) return null;
    const { checkpointId, newSession } = pending;
    const image = await this.deps.checkpoints.image(checkpointId);
    if (!image) {
      this.deps.log.warn(`memory image of ${checkpointId} is missing; ${sessionId} boots fresh on the checkpoint's files`);
      return null;
    }
    if (image.meta.runtimeDir !== this.deps.runtimeDir) {
      this.deps.log.warn(`memory image of ${checkpointId} was taken with another daemon build; ${sessionId} boots fresh on the checkpoint's files`);
      return null;
    }
    return { checkpointId, label: `the memory of ${checkpointId}`, dir: image.dir, meta: image.meta, newSession };
  }

  /**
   * Makes the daemon close its channel before the runtime saves the sandbox (this runsc cannot save
   * TCP endpoints): the asking connection is released by the daemon before this returns, the others
   * are reset from both sides.
   */
  private async quiesce(live: LiveSandbox): Promise<void> {
    await live.daemon.json('POST', '/quiesce', {}, DaemonQuiesceReplySchema, { timeoutMs: 10_000, awaitPeerClose: true });
    live.daemon.reset();
  }

  /**
   * Tells a daemon whose channel is closed (after a checkpoint or a restore) to listen again, through
   * the sandbox's init, which forwards SIGUSR2 to it.
   */
  private async wake(sandboxId: string): Promise<void> {
    await this.deps.driver.signalInit(sandboxId, 'SIGUSR2');
  }

  /**
   * A full checkpoint of the session's running sandbox: its daemon closes its channel (this runsc
   * cannot save TCP endpoints), the runtime saves memory into `imageDir` and stops the sandbox,
   * `whileStopped` snapshots the filesystem so both parts match, and the sandbox runs on from the
   * image. Calls arriving meanwhile wait. Refused with FULL_CHECKPOINT_REFUSED before anything is
   * touched when the daemon sees sockets it cannot close.
   */
  async checkpointMemory(sessionId: string, imageDir: string, whileStopped: () => Promise<void>): Promise<MemoryCheckpoint> {
    const live = this.liveFor(sessionId);
    if (!live) throw new SpaceError(ErrorCode.FULL_CHECKPOINT_REFUSED, 'the session has no running sandbox: there is no memory to save');
    // Measured with this runsc: a daemon restored from an image that was itself taken of a restored
    // sandbox sometimes spins on a CPU (its restarted listener reports EPOLLIN|EPOLLERR|EPOLLHUP for
    // ever while accept() finds nothing: a stale epoll entry). One generation of images is safe.
    if (live.record.fromImage) {
      throw new SpaceError(ErrorCode.FULL_CHECKPOINT_REFUSED, 'this sandbox already runs from a memory image (a full checkpoint, a fork, or a template image), and this gVisor release cannot save such a sandbox again safely; the next sandbox that boots for the session can be fully checkpointed');
    }
    if (live.frozen) await live.frozen.catch(() => undefined);
    const run = this.freezeAndSave(live, imageDir, whileStopped);
    live.frozen = run;
    try {
      return await run;
    } finally {
      live.frozen = null;
    }
  }

  private async freezeAndSave(live: LiveSandbox, imageDir: string, whileStopped: () => Promise<void>): Promise<MemoryCheckpoint> {
    const { deps } = this;
    const { sandboxId } = live.record;
    const phases = new PhaseTimer();
    await this.quiesce(live);
    phases.mark('quiesce');
    try {
      await deps.driver.checkpoint(sandboxId, imageDir);
    } catch (err) {
      if ((await deps.driver.stats(sandboxId)).running) {
        await this.wake(sandboxId);
        await this.waitForDaemon(sandboxId, live.daemon);
      } else {
        await this.stop(sandboxId);
      }
      throw new SpaceError(ErrorCode.FULL_CHECKPOINT_FAILED, `${(err as Error).message}${this.live.has(sandboxId) ? '' : '; the sandbox stopped and the session resumes on the next call'}`);
    }
    phases.mark('save');
    let snapshotError: unknown = null;
    await whileStopped().catch((err) => (snapshotError = err));
    phases.mark('snapshot');
    try {
      await deps.network.readdress(sandboxId, live.record.leaseIndex);
      await deps.driver.resumeFromImage(sandboxId, deps.records.workDir(sandboxId), imageDir);
      phases.mark('restore');
      await this.wake(sandboxId);
      await this.waitForDaemon(sandboxId, live.daemon);
      live.pid = (await deps.driver.stats(sandboxId)).pid;
      live.record = { ...live.record, fromImage: true };
      await deps.records.save(live.record);
      phases.mark('daemon');
      deps.log.info(`sandbox ${sandboxId} paused ${phases.summary()} for a full checkpoint`);
    } catch (err) {
      // The checkpoint itself is complete; only this sandbox is lost, and the session resumes from it.
      deps.log.warn(`sandbox ${sandboxId} did not run on after its checkpoint: ${(err as Error).message}; console: ${await consoleTail(deps.records.workDir(sandboxId), 1500)}`);
      await this.stop(sandboxId);
    }
    if (snapshotError) throw snapshotError;
    return { meta: { token: live.record.token, runtimeDir: deps.runtimeDir }, pauseMs: Math.round(phases.elapsed()) };
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
    if (found.frozen) await found.frozen.catch(() => undefined);
    if (found.pid === null || processAlive(found.pid)) return found;
    this.deps.log.warn(`sandbox ${sandboxId} of ${found.record.sessionId} died; cleaning up`);
    await this.stop(sandboxId);
    throw new SpaceError(ErrorCode.SANDBOX_NOT_FOUND, `sandbox ${sandboxId} died`);
  }

  async info(sandboxId: string): Promise<SandboxInfo> {
    const { record } = await this.getAlive(sandboxId);
    return this.describe(record, true);
  }

  /** The sandboxes serving sessions whose process is alive (pooled ones waiting for a session are not listed). */
  list(): SandboxInfo[] {
    return [...this.live.values()].filter((s) => !isUnclaimed(s.record) && (s.pid === null || processAlive(s.pid))).map((s) => this.describe(s.record, true));
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
  deleteVolume(sessionId: string): Promise<void> {
    return this.deps.sessionQueue.run(sessionId, async () => {
      const live = this.liveFor(sessionId);
      if (live) await this.stop(live.record.sandboxId);
      await this.deps.subvolumes.delete(this.volumePath(sessionId));
      await this.setPendingMemory(sessionId, null);
      await this.deps.egress.removeSession(sessionId);
    });
  }

  /** Stops a sandbox on request (the session stays), in its session's turn: never in the middle of its checkpoint. */
  async kill(sandboxId: string): Promise<void> {
    const live = this.live.get(sandboxId);
    if (live) await this.deps.sessionQueue.run(live.record.sessionId, () => this.stop(sandboxId));
  }

  /** The sandbox (and session) a packet from `ip` comes from, for the gateway. */
  sourceOf(ip: string): SandboxSource | null {
    for (const { record } of this.live.values()) if (record.sandboxIp === ip) return { sandboxId: record.sandboxId, sessionId: record.sessionId };
    return null;
  }

  /** Sessions with a running sandbox here whose egress settings the gateway lacks (after a restart). */
  egressUnconfigured(): string[] {
    return [...this.live.values()].filter((l) => !isUnclaimed(l.record) && !this.deps.egress.isConfigured(l.record.sessionId)).map((l) => l.record.sessionId);
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
      // Pooled sandboxes of the previous run are not adopted: the new pool boots its own.
      if (!isUnclaimed(record) && stats.running && (await daemonAnswers(daemon, 2000)) === true) {
        this.live.set(record.sandboxId, { record, daemon, pid: stats.pid, frozen: null });
        await deps.network.refreshRules(record.sandboxId);
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
    // A leftover that cannot be removed is reported, never a reason to refuse to start.
    for (const entry of await readdir(deps.volume.dir('volumes')).catch(() => [] as string[])) {
      if (entry.endsWith('.restoring') || entry.startsWith(`${unclaimedPrefix}_`)) {
        try {
          await deps.subvolumes.delete(deps.volume.dir('volumes', entry));
          removed++;
        } catch (err) {
          deps.log.warn(`could not remove the leftover volumes/${entry}: ${(err as Error).message}`);
        }
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
    return { sandboxId: record.sandboxId, sessionId: record.sessionId, nodeId: this.deps.nodeId, template: record.template, startedAt: record.startedAt, running, restoredFrom: record.restoredFrom ?? null };
  }
}
