import type { EgressGateway } from '../gateway/egress-gateway.js';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, SandboxLayout, SpaceError, newId, type StartSandboxRequest } from '@space/protocol';
import { trustEnv } from '../gateway/sandbox-trust.js';
import type { Logger } from '../logger.js';
import type { SandboxNetwork } from '../network/sandbox-network.js';
import type { RuntimeDriver, SandboxSpec } from '../runtime/driver.js';
import type { NamedVolumes } from '../storage/named-volumes.js';
import { inSandbox } from '../runtime/sandbox-runtime-dir.js';
import { writeInsideVolume } from '../runtime/volume-paths.js';
import type { SandboxRecord, SandboxRecords } from '../sandbox-record.js';
import type { DaemonLink } from './daemon-link.js';
import type { LiveSandbox } from './live-sandboxes.js';
import { newMachineId, type MemorySource, type SessionVolumes } from './session-volumes.js';
import { hostErrorText } from '../host-errors.js';
import type { PhaseTimer } from './phase-timer.js';
import { InboundConnections } from './inbound-connections.js';
import { SandboxEntries } from './sandbox-entries.js';
import type { UsageMeter } from '../usage/usage-meter.js';

export interface SandboxBooterDeps {
  /** Identifies this node agent in host-wide leases (its data directory). */
  owner: string;
  driver: RuntimeDriver;
  network: SandboxNetwork;
  /** The egress gateway: a sandbox's connections through it close with the sandbox. */
  egress: Pick<EgressGateway, 'closeSandbox'>;
  records: SandboxRecords;
  link: DaemonLink;
  /** The read-only directory mounted at /.space: the agent and its helpers. */
  runtimeDir: string;
  /** Where the tenants' volumes a sandbox mounts are. */
  namedVolumes: Pick<NamedVolumes, 'path'>;
  /** The sessions' volumes: the daemon's token is written even into a full one. */
  volumes: Pick<SessionVolumes, 'writeBeyondLimit'>;
  /** Reads what a sandbox used once more before it stops. */
  usage: Pick<UsageMeter, 'end'>;
  log: Logger;
}

export interface BootOptions {
  /** Restore from this memory image instead of booting: the image's processes continue. */
  memory?: MemorySource | null;
  /** What the start could not do as asked (a memory image it did not restore), kept in its record and info. */
  note?: string | null;
  /** Relative CPU weight (pooled sandboxes wait at the lowest until claimed). */
  cpuShares?: number;
}

/** The hostname of a session's booted or restored sandboxes, from the session id (a pooled one keeps its own). */
export function hostnameOf(sessionId: string): string {
  return `space-${sessionId.split('_')[1]!.slice(0, 8)}`;
}

/** What a session adds to its sandbox's environment: its id, then its own variables. */
export function sessionEnvOf(request: StartSandboxRequest): Record<string, string> {
  return { SPACE_SESSION_ID: request.sessionId, ...request.env };
}

/** Where the session's processes run without a cwd, as the daemon takes it: "" for the workspace. */
export function sessionCwdOf(request: StartSandboxRequest): string {
  return request.cwd ?? '';
}

/** The end of a sandbox's console output (runsc's and the daemon's), for error messages. */
export async function consoleTail(workDir: string, chars: number): Promise<string> {
  return (await readFile(path.join(workDir, 'console.log'), 'utf8').catch(() => '')).slice(-chars);
}

/**
 * Brings a sandbox up on a volume, booted or restored from a memory image, until its daemon
 * answers on a fresh token; and takes one down again (runtime, network, record).
 */
export class SandboxBooter {
  constructor(private readonly deps: SandboxBooterDeps) {}

  async boot(
    request: StartSandboxRequest,
    rootfs: string,
    phases: PhaseTimer,
    { memory = null, note = null, cpuShares }: BootOptions = {},
  ): Promise<LiveSandbox> {
    const { deps } = this;
    const sandboxId = newId('sbx');
    const token = randomBytes(32).toString('hex');
    const workDir = deps.records.workDir(sandboxId);
    await mkdir(workDir, { recursive: true, mode: 0o700 });
    // A restored image's sockets may be bound to the addresses of the sandboxes it was saved from.
    const net = await deps.network.create(sandboxId, deps.owner, memory?.meta.addresses ?? []);
    phases.mark('network');
    const record: SandboxRecord = {
      sandboxId,
      sessionId: request.sessionId,
      template: request.template,
      startedAt: new Date().toISOString(),
      token,
      leaseIndex: net.lease.index,
      sandboxIp: net.lease.sandboxIp,
      restoredFrom: memory?.checkpointId ?? null,
      note,
      memoryMb: request.resources.memoryMb,
      ...(request.tenantId ? { tenantId: request.tenantId } : {}),
      ...(net.inheritedAddresses.length > 0 ? { inheritedAddresses: net.inheritedAddresses } : {}),
    };
    await deps.records.save(record);
    const spec = this.specOf(request, record, rootfs, net.netnsPath, cpuShares);
    try {
      if (memory) await this.restore(spec, record, memory, request, phases);
      else {
        // The volume is the session's: a link it left at run/ or run/space must not send this write elsewhere.
        // The daemon removes the token as it starts, so a full session is over its limit only meanwhile.
        await deps.volumes.writeBeyondLimit(request.sessionId, request.resources.diskGb, () =>
          writeInsideVolume(rootfs, SandboxLayout.daemonTokenPath.slice(1), token, 0o600),
        );
        await deps.driver.start(spec);
        phases.mark('runtime');
      }
      const daemon = deps.link.connect(sandboxId, record.sandboxIp, token);
      await deps.link.waitReady(sandboxId, daemon);
      phases.mark('agent');
      deps.log.info(`sandbox ${sandboxId} for ${request.sessionId} ${memory ? `restored from ${memory.label}` : 'ready'} in ${phases.summary()}`);
      return {
        record,
        daemon,
        inbound: new InboundConnections(),
        pid: (await deps.driver.stats(sandboxId)).pid,
        pendingCall: null,
        callsInFlight: 0,
        entries: new SandboxEntries(),
      };
    } catch (err) {
      const console = await consoleTail(workDir, 1000);
      await this.teardown(record);
      await rm(path.join(rootfs, SandboxLayout.daemonTokenPath), { force: true });
      if (err instanceof SpaceError) throw err;
      throw new SpaceError(ErrorCode.SANDBOX_START_FAILED, `sandbox failed to start: ${hostErrorText(err)}${console ? `; console: ${console}` : ''}`);
    }
  }

  /** Stops the sandbox in the runtime, removes its network and its record. */
  async teardown(record: SandboxRecord): Promise<void> {
    await this.deps.usage.end(record);
    await this.deps.driver.destroy(record.sandboxId).catch((err) => this.deps.log.warn(`destroying ${record.sandboxId}: ${(err as Error).message}`));
    this.deps.egress.closeSandbox(record.sandboxId);
    await this.deps.network.destroy(record.sandboxId, record.leaseIndex);
    await this.deps.records.remove(record.sandboxId);
  }

  /** The restored daemon still has the image's token, session and hostname: wake it, then rebind it to this sandbox. */
  private async restore(spec: SandboxSpec, record: SandboxRecord, memory: MemorySource, request: StartSandboxRequest, phases: PhaseTimer): Promise<void> {
    const { link } = this.deps;
    await this.deps.driver.restore(spec, memory.dir);
    phases.mark('restore');
    await link.wake(record.sandboxId);
    const restored = link.connect(record.sandboxId, record.sandboxIp, memory.meta.token);
    await link.waitReady(record.sandboxId, restored);
    const identity = { hostname: hostnameOf(request.sessionId), ...(memory.newSession ? { machineId: newMachineId() } : {}) };
    await link.rebind(restored, {
      token: record.token,
      env: sessionEnvOf(request),
      cwd: sessionCwdOf(request),
      identity,
      newSession: memory.newSession,
      resetAfter: true,
    });
    restored.close();
  }

  private specOf(request: StartSandboxRequest, record: SandboxRecord, rootfs: string, netnsPath: string, cpuShares: number | undefined): SandboxSpec {
    return {
      sandboxId: record.sandboxId,
      rootfs,
      workDir: this.deps.records.workDir(record.sandboxId),
      hostname: hostnameOf(request.sessionId),
      args: [inSandbox.init, inSandbox.agent],
      env: {
        PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        HOME: '/root',
        // Who the session's processes run as, for tools that read it rather than ask (E2B's sandboxes set it too).
        USER: 'root',
        LOGNAME: 'root',
        LANG: 'C.UTF-8',
        ...trustEnv,
        ...sessionEnvOf(request),
        SPACE_DAEMON_PORT: String(SandboxLayout.daemonPort),
        SPACE_DAEMON_TOKEN_FILE: SandboxLayout.daemonTokenPath,
        SPACE_WORKDIR: SandboxLayout.workdir,
        SPACE_DAEMON_CWD: sessionCwdOf(request),
        SPACE_PTY_HELPER: inSandbox.pty,
      },
      resources: request.resources,
      runtimeDir: this.deps.runtimeDir,
      mounts: request.mounts.map((m) => ({ source: this.deps.namedVolumes.path(m.volumeId), destination: m.path, readOnly: m.readOnly })),
      netnsPath,
      cpuShares,
    };
  }
}
