import type { Resources } from '@space/protocol';

/** What a runtime needs to start one sandbox. */
export interface SandboxSpec {
  sandboxId: string;
  /** Writable root filesystem (a btrfs subvolume). */
  rootfs: string;
  /** Directory the driver may use for its bundle, logs and state. */
  workDir: string;
  hostname: string;
  /** argv of the sandbox's first process (the daemon under its init). */
  args: string[];
  env: Record<string, string>;
  resources: Resources;
  /** Host directory mounted read-only at `/.space`: the daemon and the runtime it runs on. */
  runtimeDir: string;
  /** Host directories (tenants' volumes) bound into the sandbox. */
  mounts: { source: string; destination: string; readOnly: boolean }[];
  netnsPath: string;
  /** Relative CPU weight against other sandboxes (cgroup cpu.shares; default 1024). */
  cpuShares?: number;
}

export interface SandboxStats {
  /** The sandbox exists and is running or paused. */
  running: boolean;
  pid: number | null;
}

/** A sandbox's cgroup counters: CPU time so far, memory now, and its limits. */
/** A host limit that kills a sandbox: its memory backstop (the host's OOM killer) or its task limit. */
export type HostLimit = 'oom' | 'pids';

export interface SandboxUsage {
  cpuNanos: number;
  /** The CPU quota in CPUs; null when unlimited. */
  cpuCount: number | null;
  memoryBytes: number;
  memoryLimitBytes: number | null;
}

/** What a claim changes of a pooled sandbox: its CPU weight, and where its root directory now is. */
export interface ClaimedSandbox {
  cpuShares: number;
  rootfs: { from: string; to: string };
}

/**
 * The runtime behind the node agent. gVisor implements it here; a Firecracker driver (VM with
 * kernel, rootfs image, vsock daemon channel, snapshot files) can implement the same methods. A
 * method whose runtime command does not end by its deadline rejects with `CommandTimeout`
 * (run-command.ts): the sandbox's runtime no longer answers, and `destroy` is what still works.
 */
export interface RuntimeDriver {
  /** Checks the host can run sandboxes (throws a message that says what to install or change); resolves to the runtime's version (memory images are tied to it). */
  preflight(): Promise<string>;
  start(spec: SandboxSpec): Promise<void>;
  /**
   * Saves the sandbox's memory and process state into `imageDir`. The sandbox is stopped afterwards,
   * or with `leaveRunning` left as it was (running, or paused if it was paused).
   */
  checkpoint(sandboxId: string, imageDir: string, options?: { leaveRunning?: boolean }): Promise<void>;
  /**
   * Readies a running sandbox for a save of its memory, outside its pause: gVisor's first save scans
   * every page it has not yet accounted for, looking for zeros, while the sandbox is paused (1 GiB:
   * 1.4 s of a 3.3 s save); `runsc events --stats` accounts for them in 70 ms while it runs.
   */
  prepareSave(sandboxId: string): Promise<void>;
  /** Freezes every process of the sandbox (nothing runs, nothing is written) until `resume`. */
  pause(sandboxId: string): Promise<void>;
  /** Lets a paused sandbox run again; a sandbox already running is left alone. */
  resume(sandboxId: string): Promise<void>;
  /** Starts a new sandbox from a memory image instead of booting: its processes continue where they were. */
  restore(spec: SandboxSpec, imageDir: string): Promise<void>;
  /** A pooled sandbox claimed by a session: its CPU weight against other sandboxes (cgroup cpu.shares scale) changes now. Synchronous (cgroupfs). */
  claimed(sandboxId: string, cpuShares: number): void;
  /**
   * The sandbox's bundle after a claim, for the runtime's later commands on it: the new CPU weight
   * and its root directory's new path (the directory is renamed by the caller).
   */
  rebundle(workDir: string, change: ClaimedSandbox): Promise<void>;
  /**
   * Sets the host's memory limit of the sandbox (its backstop, above `memoryMb`) plus `extraBytes`:
   * while a memory image is written, the pages it goes to are charged to the sandbox's cgroup.
   */
  setMemoryBackstop(sandboxId: string, memoryMb: number, extraBytes?: number): Promise<void>;
  /** Sends a signal to the sandbox's first process. */
  signalInit(sandboxId: string, signal: string): Promise<void>;
  /** Stops the sandbox and removes the runtime's record of it. Idempotent. */
  destroy(sandboxId: string): Promise<void>;
  stats(sandboxId: string): Promise<SandboxStats>;
  /** The sandbox's cgroup counters; null when it has none (it is gone). */
  usage(sandboxId: string): Promise<SandboxUsage | null>;
  /** Which host limit the sandbox ran into, if any: read before it is destroyed, to say why it died. */
  limitHit(sandboxId: string): Promise<HostLimit | null>;
  /** Ids of every sandbox the runtime knows about on this node (for reconciliation). */
  list(): Promise<string[]>;
}
