import { inSpan } from '@space/server-kit';
import { existsSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type CommandResult, type CommandRunner, CommandTimeout, spawnedCommands } from '../run-command.js';
import type { ClaimedSandbox, HostLimit, RuntimeDriver, SandboxSpec, SandboxStats, SandboxUsage } from './driver.js';
import { killCgroupProcesses } from './cgroup-kill.js';
import { readCgroupUsage, readLimitHit, sandboxCgroupDir } from './cgroup-usage.js';
import { buildOciSpec } from './oci-spec.js';

/** How runsc runs sandboxes and writes memory images (`SPACE_RUNSC_PLATFORM`, `SPACE_CHECKPOINT_COMPRESSION`). */
export interface GvisorOptions {
  /** ptrace (default: starts processes faster, 1.4-3.9x) or systrap (cheaper system calls: files written 1.6x faster); docs/benchmarks.md. */
  platform: 'ptrace' | 'systrap';
  /** Memory images: none (default: a 100 MB sandbox pauses 318 ms instead of 706) or flate-best-speed (about 3.6x smaller for an idle sandbox). */
  checkpointCompression: 'flate-best-speed' | 'none';
}

/**
 * How long a runsc command may take before it is killed. A sandbox whose Sentry is wedged (stopped,
 * deadlocked) answers none of them: `state`, `events`, `pause`, `kill` and even `delete --force`
 * wait for good (measured with the Sentry stopped by SIGSTOP), and the operation waiting on one
 * holds its session's turn. A command that answers at all does so within a second; saving and
 * loading memory take longer, in proportion to it.
 */
const runscDeadlines = {
  /** `state`, `list`, `events`, `pause`, `resume`, `kill`, `delete`. */
  controlMs: 15_000,
  /** `run` (a boot: seconds in a burst of 100 on two cores), and the base of `checkpoint` and `restore`. */
  startMs: 120_000,
  /** Added to `checkpoint` and `restore` per GiB of memory (a first save here ~0.4 GiB/s, a restore ~0.25). */
  perGibMs: 30_000,
};

/** The deadline of a runsc command that saves or loads `bytes` of memory. */
function memoryDeadlineMs(bytes: number): number {
  return runscDeadlines.startMs + Math.ceil((bytes / 2 ** 30) * runscDeadlines.perGibMs);
}

/**
 * gVisor (runsc). runsc refuses networking when it believes it is in the host network namespace
 * because it looks for /proc/sys/net/core/rmem_default, which newer kernels show everywhere; runsc
 * therefore runs in its own mount namespace with a tmpfs over /proc/sys/net.
 */
export class GvisorDriver implements RuntimeDriver {
  constructor(
    private readonly stateRoot: string,
    /** The host-side subreaper runsc runs under (native/space-shim.c). */
    private readonly shimBinary: string,
    private readonly options: GvisorOptions,
    private readonly commands: CommandRunner = spawnedCommands,
    private readonly runscBinary = 'runsc',
  ) {}

  private globalFlags(logFile?: string): string[] {
    // --net-disconnect-ok: a full checkpoint cuts connections with the outside of the sandbox instead
    // of failing on them (the node resets those it knows of first; see the agent's outside_connections.go).
    // --cpu-num-from-quota: the sandbox sees the CPUs of its session's quota (at least 2), not the host's.
    const flags = [
      `--root=${this.stateRoot}`,
      `--platform=${this.options.platform}`,
      '--network=sandbox',
      '--overlay2=none',
      '--net-disconnect-ok',
      '--cpu-num-from-quota',
    ];
    if (logFile) flags.push(`--log=${logFile}`);
    return flags;
  }

  async preflight(): Promise<string> {
    const found = await this.commands.run([this.runscBinary, '--version'], { allowFailure: true }).catch(() => null);
    if (found?.code !== 0) throw new Error(`${this.runscBinary} not found: install gVisor with "./space setup" (runsc from bookworm-backports)`);
    if (!existsSync(this.shimBinary)) throw new Error(`${this.shimBinary} is missing: run "npm run build" (./space does it)`);
    await mkdir(this.stateRoot, { recursive: true });
    await ensureHostPidRoom();
    // An image is restored only under the platform it was saved with.
    return `${found.stdout.split('\n')[0]!.trim()} platform=${this.options.platform}`;
  }

  async start(spec: SandboxSpec): Promise<void> {
    const bundle = await this.writeBundle(spec);
    await this.runInOwnMountNamespace(spec.workDir, ['run', '--detach', `--bundle=${bundle}`, spec.sandboxId], runscDeadlines.startMs);
    await this.setMemoryBackstop(spec.sandboxId, spec.resources.memoryMb);
  }

  async checkpoint(sandboxId: string, imageDir: string, options: { leaveRunning?: boolean } = {}): Promise<void> {
    await mkdir(imageDir, { recursive: true });
    const run = [
      this.runscBinary,
      ...this.globalFlags(),
      'checkpoint',
      `--image-path=${imageDir}`,
      `--compression=${this.options.checkpointCompression}`,
      ...(options.leaveRunning ? ['--leave-running'] : []),
      sandboxId,
    ];
    const timeout = memoryDeadlineMs(readCgroupUsage(sandboxId)?.memoryBytes ?? 0);
    const result = await inSpan('runsc checkpoint', { 'space.sandbox_id': sandboxId }, () =>
      this.commands.run(inOwnMountNamespace(run), { allowFailure: true, timeout }),
    );
    if (result.code !== 0) throw new Error(`runsc checkpoint failed: ${checkpointFailure(result.stderr || result.stdout)}`);
  }

  async prepareSave(sandboxId: string): Promise<void> {
    await this.runsc(['events', '--stats', sandboxId], { allowFailure: true });
  }

  async pause(sandboxId: string): Promise<void> {
    await this.runsc(['pause', sandboxId]);
  }

  async resume(sandboxId: string): Promise<void> {
    const result = await this.runsc(['resume', sandboxId], { allowFailure: true });
    if (result.code !== 0 && (await this.status(sandboxId)) !== 'running') throw new Error(`runsc resume failed: ${(result.stderr || result.stdout).trim()}`);
  }

  async restore(spec: SandboxSpec, imageDir: string): Promise<void> {
    await this.writeBundle(spec);
    await this.runInOwnMountNamespace(
      spec.workDir,
      ['restore', '--detach', `--bundle=${path.join(spec.workDir, 'bundle')}`, `--image-path=${imageDir}`, spec.sandboxId],
      memoryDeadlineMs(spec.resources.memoryMb * 2 ** 20),
    );
    await this.setMemoryBackstop(spec.sandboxId, spec.resources.memoryMb);
  }

  async setMemoryBackstop(sandboxId: string, memoryMb: number, extraBytes = 0): Promise<void> {
    const v1 = path.join(sandboxCgroupDir(sandboxId, 'memory'), 'memory.limit_in_bytes');
    const v2 = path.join(sandboxCgroupDir(sandboxId), 'memory.max');
    const file = existsSync(v1) ? v1 : existsSync(v2) ? v2 : null;
    if (file) await writeFile(file, String(memoryBackstopBytes(memoryMb) + extraBytes));
  }

  /** cgroup v1 `cpu.shares`, or v2 `cpu.weight` (1-10000, 100 for the default 1024 shares). */
  claimed(sandboxId: string, cpuShares: number): void {
    const v1 = path.join(sandboxCgroupDir(sandboxId, 'cpu'), 'cpu.shares');
    const v2 = path.join(sandboxCgroupDir(sandboxId), 'cpu.weight');
    // Written at once, like the cgroup reads (cgroup-usage.ts): cgroupfs never waits on a disk.
    if (existsSync(v1)) writeFileSync(v1, String(cpuShares));
    else if (existsSync(v2)) writeFileSync(v2, String(Math.max(1, Math.min(10_000, Math.round((cpuShares * 100) / 1024)))));
  }

  /** The running sandbox keeps its open directories: only the bundle needs the new path. */
  async rebundle(workDir: string, { cpuShares, rootfs }: ClaimedSandbox): Promise<void> {
    const moved = (p: string): string => (p === rootfs.from || p.startsWith(`${rootfs.from}/`) ? rootfs.to + p.slice(rootfs.from.length) : p);
    await this.editBundle(workDir, (spec) => {
      const { root, mounts, linux } = spec as {
        root: { path: string };
        mounts: { source?: string }[];
        linux: { resources: { cpu: Record<string, number> } };
      };
      root.path = moved(root.path);
      for (const mount of mounts) if (mount.source) mount.source = moved(mount.source);
      linux.resources.cpu.shares = cpuShares;
    });
  }

  private async editBundle(workDir: string, edit: (spec: Record<string, unknown>) => void): Promise<void> {
    const file = path.join(workDir, 'bundle', 'config.json');
    const spec = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
    edit(spec);
    await writeFile(file, JSON.stringify(spec));
  }

  async signalInit(sandboxId: string, signal: string): Promise<void> {
    await this.runsc(['kill', sandboxId, signal]);
  }

  /** A runsc command on the node's sandboxes, timed as `runsc <command>` in a traced call; killed past `runscDeadlines.controlMs` (CommandTimeout). */
  private runsc(args: string[], options?: { allowFailure?: boolean }): Promise<CommandResult> {
    return inSpan(`runsc ${args[0]}`, {}, () =>
      this.commands.run([this.runscBinary, ...this.globalFlags(), ...args], { ...options, timeout: runscDeadlines.controlMs }),
    );
  }

  private async writeBundle(spec: SandboxSpec): Promise<string> {
    const bundle = path.join(spec.workDir, 'bundle');
    await mkdir(bundle, { recursive: true });
    await writeFile(path.join(bundle, 'config.json'), JSON.stringify(buildOciSpec(spec)));
    return bundle;
  }

  /**
   * Runs `runsc run|restore --detach` under the shim, which stays as the sandbox's reaper and says
   * on its fd 3 how runsc exited ("exit N"); killed with the shim past `timeoutMs`.
   */
  private async runInOwnMountNamespace(workDir: string, command: string[], timeoutMs: number): Promise<void> {
    const run = inOwnMountNamespace([this.runscBinary, ...this.globalFlags(path.join(workDir, 'runsc.log')), ...command]);
    const status = await inSpan(`runsc ${command[0]}`, {}, () =>
      this.commands.startDetached([this.shimBinary, ...run], path.join(workDir, 'console.log'), timeoutMs),
    );
    const code = /^exit (\d+)/.exec(status)?.[1] ?? '128';
    if (code !== '0') throw new Error(`runsc ${command[0]} exited ${code}`);
  }

  async destroy(sandboxId: string): Promise<void> {
    if (!existsSync(path.join(this.stateRoot, sandboxId)) && !(await this.list()).includes(sandboxId)) return;
    try {
      await this.runsc(['delete', '--force', sandboxId], { allowFailure: true });
    } catch (err) {
      if (!(err instanceof CommandTimeout)) throw err;
      // Its Sentry is wedged: once it and everything else in the sandbox's cgroup is killed,
      // `delete --force` completes (1.4 s measured) and removes what runsc keeps of it.
      killCgroupProcesses(sandboxId);
      await this.runsc(['delete', '--force', sandboxId], { allowFailure: true });
    }
  }

  async stats(sandboxId: string): Promise<SandboxStats> {
    const state = await this.state(sandboxId);
    return { running: state?.status === 'running' || state?.status === 'paused', pid: state?.pid ?? null };
  }

  async usage(sandboxId: string): Promise<SandboxUsage | null> {
    return readCgroupUsage(sandboxId);
  }

  async limitHit(sandboxId: string): Promise<HostLimit | null> {
    return readLimitHit(sandboxId);
  }

  private async status(sandboxId: string): Promise<string | null> {
    return (await this.state(sandboxId))?.status ?? null;
  }

  private async state(sandboxId: string): Promise<{ status?: string; pid?: number } | null> {
    const result = await this.runsc(['state', sandboxId], { allowFailure: true });
    return result.code === 0 ? (JSON.parse(result.stdout) as { status?: string; pid?: number }) : null;
  }

  async list(): Promise<string[]> {
    const result = await this.runsc(['list', '--quiet'], { allowFailure: true });
    return result.stdout
      .split('\n')
      .map((s) => s.trim())
      .filter(Boolean);
  }
}

/**
 * gVisor has no OOM killer of its own (google/gvisor#1967): past the host cgroup's memory limit
 * the host kills the whole sandbox. So the sandbox runs with the session's memory as its own
 * total (runsc reads it from the spec at start: /proc/meminfo shows it; the node's MemoryWatch has
 * the in-sandbox agent kill the biggest process when it is used up), and the host limit is raised
 * after the start to this backstop, which only a burst faster than that reaches. The node's
 * placement still counts `memoryMb` per sandbox.
 */
export function memoryBackstopBytes(memoryMb: number): number {
  return Math.round(memoryMb * 1.25 + 256) * 2 ** 20;
}

/**
 * Each process in a sandbox costs gVisor about 8 host tasks (systrap's stubs), so a host at
 * Linux's default of 32,768 pids runs out with three sandboxes at their default 1,024 processes,
 * and then the node itself cannot fork. The kernel's own ceiling is the sensible setting for a
 * host that runs sandboxes; a host already set higher is left as it is.
 */
const wantedPidMax = 4_194_304;

async function ensureHostPidRoom(): Promise<void> {
  const file = '/proc/sys/kernel/pid_max';
  const current = Number((await readFile(file, 'utf8').catch(() => '')).trim());
  if (current > 0 && current < wantedPidMax) await writeFile(file, String(wantedPidMax)).catch(() => undefined);
}

/** runsc, in a mount namespace of its own where /proc/sys/net is hidden (see the class comment). */
function inOwnMountNamespace(runsc: string[]): string[] {
  return ['unshare', '-m', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs none /proc/sys/net && exec "$@"', 'sh', ...runsc];
}

/** gVisor's TCP endpoint states, numbered as in this runsc (Linux's order). */
const tcpStateNames = [
  '',
  'ESTABLISHED',
  'SYN_SENT',
  'SYN_RECV',
  'FIN_WAIT1',
  'FIN_WAIT2',
  'TIME_WAIT',
  'CLOSE',
  'CLOSE_WAIT',
  'LAST_ACK',
  'LISTEN',
  'CLOSING',
];

/** The cause in runsc's output (it is followed by a dump of the object and a Go stack trace). */
function checkpointFailure(text: string): string {
  const rejected = /save rejected[^\n]*?(?=:\s*\n|$)/m.exec(text);
  const state = /\bstate:atomicbitops\.Uint32\{[^}]*\}, value:0x([0-9a-f]+)\}/.exec(text);
  if (rejected) return `${rejected[0].slice(0, 600)}${state ? ` (TCP state ${tcpStateNames[parseInt(state[1]!, 16)] ?? state[1]})` : ''}`;
  return text.trim().split('\n').slice(-3).join(' | ').slice(-600);
}
